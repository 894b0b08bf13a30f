#if canImport(Glibc)
import Glibc
#endif
import Control
import Foundation
import ManifestFormat
import PhotolalaCore
import Synchronization

/// `photolalactl restore --by-date --to DIR`, the command's side (privacy.md "Export every
/// photo of the account"): takes the daemon's listing of every photo object of the
/// account, names each file by its date (`ExportName`), asks archived objects back, then
/// writes the files on `workers` threads through the restore's safe writer, each object
/// streamed from the daemon and its MD5 checked against its key before the rename. A
/// file already there with the same bytes is skipped, so a second run writes nothing.
/// No manifest and no key is needed: it is the way out for a user who lost every NAS.
package final class ExportRun: Sendable {
    package struct Request: Sendable, Equatable {
        package var to: String
        package var dryRun: Bool
        package var json: Bool
        package var workers: Int

        package init(to: String, dryRun: Bool, json: Bool, workers: Int = 10) {
            self.to = to
            self.dryRun = dryRun
            self.json = json
            self.workers = workers
        }
    }

    /// How a restore's session names the export in `status`.
    static let label = "every photo of the account, by date"

    private let client: ControlClient
    private let request: Request
    private let writer = RestoreWriter(overwrite: false, owners: .keep)
    private let interrupted: @Sendable () -> Bool
    private let state = Mutex(State())
    private let tty: Bool

    private struct State {
        var tally = RestoreTally()
        var queue: [RestoreItem] = []
        var next = 0
        var sessionId: String?
        var finished = false
    }

    package init(client: ControlClient, request: Request, interrupted: @escaping @Sendable () -> Bool) {
        self.client = client
        self.request = request
        self.interrupted = interrupted
        self.tty = isatty(2) == 1 && !request.json
    }

    /// Runs the export; prints as it goes and returns the summary (its exit code is cli.md's).
    package func run() throws(RestoreRun.Stop) -> ExportSummary {
        if !request.dryRun { try openSession() }
        let listing = try readListing()
        var summary = ExportSummary(to: request.to, dryRun: request.dryRun, catalog: listing.catalog)
        summary.skipped = listing.skipped.count
        summary.problems += listing.skipped.map { key, why in
            .init(kind: "skipped", path: RestorePlan.shown(key), message: "\(RestorePlan.shown(key)): \(why)")
        }
        let planned = ExportName.plan(listing.objects, to: request.to)
        for p in planned {
            switch p.dated {
            case .catalog: summary.dated.catalog += 1
            case .object: summary.dated.object += 1
            case .none: summary.dated.none += 1
            }
        }
        let items = planned.map(\.item)
        summary.files = items.count
        summary.bytes = items.reduce(0) { $0 + $1.version.size }
        say("\(request.dryRun ? "Would export" : "Exporting") \(items.count) photo\(items.count == 1 ? "" : "s") and video\(items.count == 1 ? "" : "s") "
            + "(\(Units.humanBytes(summary.bytes))) of this account into \(request.to), named by date")
        let statuses = try objectStatuses(planned, thaw: !request.dryRun)
        if request.dryRun {
            dryRun(planned, statuses: statuses, into: &summary)
        } else {
            tell(ExportReport(step: .started, to: request.to, objects: summary.files, bytes: summary.bytes, skipped: summary.skipped))
            write(items, statuses: statuses, into: &summary)
            report(finished: true)
            tell(ExportReport(step: .finished, to: request.to, objects: summary.files, bytes: summary.bytes, written: summary.restored,
                              alreadyThere: summary.alreadyThere, kept: summary.kept, failed: summary.failed, skipped: summary.skipped,
                              waitingArchived: summary.waitingArchived, interrupted: summary.interrupted))
        }
        return summary
    }

    // MARK: the listing

    private struct Listing {
        var catalog = ExportSummary.Catalog(state: "none")
        var objects: [ExportName.Object] = []
        var skipped: [(String, String)] = []
    }

    private func readListing() throws(RestoreRun.Stop) -> Listing {
        var streaming = client
        streaming.timeout = 300
        var listing = Listing()
        var reader = ExportLineReader()
        var ended = false
        var failure: String?
        let answer: ControlClient.StreamAnswer
        do {
            answer = try streaming.stream(.restoreExport) { bytes in
                for line in try reader.feed(bytes) {
                    switch line {
                    case .wait: break
                    case .catalog(.none): listing.catalog = .init(state: "none")
                    case .catalog(.read(let rows, let malformed)): listing.catalog = .init(state: "read", rows: rows, malformed: malformed)
                    case .catalog(.unreadable(let why)): listing.catalog = .init(state: "unreadable", message: RestorePlan.shown(why))
                    case .object(let o): listing.objects.append(o)
                    case .skipped(let key, let why): listing.skipped.append((key, why))
                    case .fail(let why): failure = why
                    case .end: ended = true
                    }
                }
            }
        } catch let failure as ControlClient.Failure {
            throw .control(failure)
        } catch {
            throw .plan("the bucket's listing could not be read: \(error)")
        }
        guard (200..<300).contains(answer.status) else {
            throw .plan(answer.errorMessage ?? "the bucket's listing could not be read (HTTP \(answer.status))")
        }
        if let failure { throw .plan(RestorePlan.shown(failure)) }
        guard answer.complete, ended else { throw .plan("the bucket's listing arrived cut short; run the command again") }
        return listing
    }

    // MARK: archive classes: asked after (and, for a real run, asked back) before any is read

    private func objectStatuses(_ planned: [ExportName.Planned], thaw: Bool) throws(RestoreRun.Stop) -> [String: ObjectStatus] {
        var out: [String: ObjectStatus] = [:]
        var archived: [String] = []
        for p in planned {
            let md5 = p.item.version.md5.hex
            if ArchiveClass.needsThaw(p.storageClass) {
                archived.append(md5)
            } else {
                out[md5] = ObjectStatus(md5: md5, state: .ready, size: p.item.version.size, storageClass: p.storageClass)
            }
        }
        for (md5, status) in try objectStatuses(Set(archived), thaw: thaw) { out[md5] = status }
        return out
    }

    /// Where each object stands, HEADs a batch at a time; `thaw` asks archived ones back.
    private func objectStatuses(_ md5s: Set<String>, thaw: Bool) throws(RestoreRun.Stop) -> [String: ObjectStatus] {
        var out: [String: ObjectStatus] = [:]
        let all = md5s.sorted()
        var start = 0
        var streaming = client
        streaming.timeout = 300
        while start < all.count {
            let batch = Array(all[start..<min(all.count, start + ObjectQuery.maxBatch)])
            start += batch.count
            do {
                let list = try streaming.call(thaw ? .restoreThaw : .restoreObjects, body: try ControlJSON.encode(ObjectQuery(md5s: batch)),
                                              as: ObjectStatusList.self)
                for s in list.objects { out[s.md5] = s }
            } catch let failure as ControlClient.Failure {
                throw .control(failure)
            } catch {
                throw .plan("\(error)")
            }
        }
        return out
    }

    // MARK: the writing

    private func write(_ items: [RestoreItem], statuses: [String: ObjectStatus], into summary: inout ExportSummary) {
        var ready: [RestoreItem] = []
        var waiting: [RestoreItem] = []
        for item in items {
            switch statuses[item.version.md5.hex]?.state {
            case .ready?: ready.append(item)
            case .archived?, .restoring?, .unknown?: waiting.append(item)
            case .missing?, nil:
                summary.failed += 1
                summary.problems.append(.init(kind: "missing", path: item.displayPath,
                                              message: "\(item.displayPath): its object (\(item.version.md5.hex)) left the bucket during the export"))
            }
        }
        let archiveClass = waiting.compactMap { statuses[$0.version.md5.hex]?.storageClass }.first
        state.withLock {
            $0.tally.progress = RestoreProgress(filesTotal: items.count, bytesTotal: items.reduce(0) { $0 + $1.version.size })
            $0.tally.progress.failed = summary.failed
            $0.tally.progress.waitingArchived = waiting.count
            $0.tally.progress.archiveClass = archiveClass
        }
        if let archiveClass, !waiting.isEmpty {
            say("\(waiting.count) file\(waiting.count == 1 ? "" : "s") wait\(waiting.count == 1 ? "s" : "") in \(archiveClass): asked back from the archive, "
                + "\(ArchiveClass.typicalWait(archiveClass)); the export waits for \(waiting.count == 1 ? "it" : "them") (stop it any time and run it again later)")
        }
        let reporter = Thread { self.reportLoop() }
        reporter.start()
        work(ready)
        var archive = ArchiveWait(waiting)
        while !archive.waiting.isEmpty && !interrupted() {
            let until = Date().addingTimeInterval(archive.nextWait())
            while Date() < until && !interrupted() { usleep(200_000) }
            guard !interrupted(), let now = try? objectStatuses(archive.md5s, thaw: true) else { continue }
            let (nowReady, gaveUp) = archive.answered(now)
            state.withLock { s in
                for (item, why) in gaveUp {
                    s.tally.progress.failed += 1
                    s.tally.problems.append(.init(kind: "failed", path: item.displayPath, message: "\(item.displayPath): \(why)"))
                }
                s.tally.progress.waitingArchived = archive.waiting.count
            }
            if !nowReady.isEmpty { work(nowReady) }
        }
        state.withLock { $0.finished = true }
        while reporter.isExecuting { usleep(10_000) }
        let folderProblems = writer.finish()
        if tty { StandardError.write("\r\u{1B}[K") }
        let s = state.withLock { $0 }
        summary.restored = s.tally.progress.restored
        summary.alreadyThere = s.tally.progress.alreadyThere
        summary.kept = s.tally.progress.kept
        summary.failed = s.tally.progress.failed
        summary.waitingArchived = archive.waiting.count
        summary.problems += s.tally.problems + folderProblems.map { .init(kind: "failed", path: nil, message: $0) }
        summary.interrupted = interrupted()
    }

    /// Writes `items` on the worker threads; returns when all are done (or interrupted).
    private func work(_ items: [RestoreItem]) {
        state.withLock {
            $0.queue = items
            $0.next = 0
        }
        let group = DispatchGroup()
        for _ in 0..<max(1, min(request.workers, items.count)) {
            group.enter()
            Thread {
                defer { group.leave() }
                while !self.interrupted(), let item = self.take() {
                    let outcome = self.writeOne(item)
                    self.state.withLock { $0.tally.record(item, outcome) }
                }
            }.start()
        }
        group.wait()
    }

    private func take() -> RestoreItem? {
        state.withLock { s in
            guard s.next < s.queue.count else { return nil }
            defer { s.next += 1 }
            return s.queue[s.next]
        }
    }

    /// One file: what is there decides (the same bytes: nothing to do); then its bytes,
    /// checked against the key's MD5, put in place.
    private func writeOne(_ item: RestoreItem) -> RestoreTally.Outcome {
        let parent: RestoreWriter.Parent
        do {
            parent = try writer.parent(of: item)
        } catch {
            return .failed(error.message)
        }
        var decision = ConflictRule.decide(writer.existing(in: parent), size: item.version.size, overwrite: false)
        if decision == .compare {
            decision = ConflictRule.compared(sameBytes: writer.holds(item.version, in: parent), overwrite: false)
        }
        switch decision {
        case .alreadyThere: return .alreadyThere
        case .keep(let why): return .kept(why)
        case .write, .replace, .compare: break
        }
        var lastError = ""
        for attempt in 0..<3 {
            if attempt > 0 { sleep(UInt32(attempt)) }
            let incoming: IncomingFile
            do {
                incoming = try writer.incoming(in: parent)
            } catch {
                return .failed(error.message)
            }
            let answer: ControlClient.StreamAnswer
            do {
                var streaming = client
                streaming.timeout = 120
                answer = try streaming.stream(.restoreObject, query: ["md5": item.version.md5.hex, "size": "\(item.version.size)"]) { bytes in
                    try incoming.append(bytes)
                    self.state.withLock { $0.tally.progress.moved(Int64(bytes.count), now: Date()) }
                }
            } catch let failure as RestoreWriter.Failure {
                incoming.discard()
                return .failed(failure.message)
            } catch {
                incoming.discard()
                lastError = "\(error)"
                continue
            }
            switch answer.status {
            case 200 where answer.complete:
                do {
                    if try incoming.commit(item.version, replace: false) { return .restored }
                    return writer.holds(item.version, in: parent) ? .alreadyThere : .kept("a file appeared there during the export")
                } catch {
                    return .failed(error.message)
                }
            case 200:
                incoming.discard()
                lastError = "the daemon stopped sending after \(answer.received) of \(item.version.size) bytes"
            case 409:
                incoming.discard()
                return .archived
            case 404:
                incoming.discard()
                return .failed("its object (\(item.version.md5.hex)) left the bucket during the export")
            default:
                incoming.discard()
                lastError = answer.errorMessage ?? "HTTP \(answer.status)"
                if answer.status < 500 { return .failed(lastError) }
            }
        }
        return .failed(lastError)
    }

    // MARK: dry run

    private func dryRun(_ planned: [ExportName.Planned], statuses: [String: ObjectStatus], into summary: inout ExportSummary) {
        for p in planned {
            let item = p.item
            var action = "restore"
            switch RestoreWriter.inspect(item, overwrite: false) {
            case .alreadyThere:
                action = "alreadyThere"
                summary.alreadyThere += 1
            case .keep(let why):
                action = "keep"
                summary.kept += 1
                summary.problems.append(.init(kind: "kept", path: item.displayPath, message: "\(item.displayPath): \(why)"))
            default:
                // An archived object is asked back at the real run; a dry run only counts it.
                switch statuses[item.version.md5.hex]?.state {
                case .archived?, .restoring?:
                    action = "waitArchived"
                    summary.waitingArchived += 1
                case .missing?, nil:
                    action = "missing"
                    summary.failed += 1
                    summary.problems.append(.init(kind: "missing", path: item.displayPath,
                                                  message: "\(item.displayPath): its object (\(item.version.md5.hex)) left the bucket"))
                case .ready?, .unknown?:
                    break
                }
            }
            summary.items?.append(.init(path: item.displayPath, size: item.version.size, md5: item.version.md5.hex, action: action,
                                        storageClass: p.storageClass, dated: p.dated.rawValue))
            say("\(action.padding(toLength: 13, withPad: " ", startingAt: 0)) \(Units.humanBytes(item.version.size).padding(toLength: 9, withPad: " ", startingAt: 0)) \(item.displayPath)")
        }
    }

    // MARK: telling people and the daemon

    private func openSession() throws(RestoreRun.Stop) {
        do {
            let reply = try client.call(.restoreSession, body: try ControlJSON.encode(RestoreReport(device: Self.label)), as: RestoreSessionReply.self)
            state.withLock { $0.sessionId = reply.id }
        } catch let failure as ControlClient.Failure {
            if case .permissionDenied = failure {
                throw .control(.permissionDenied(hint: "permission denied: exporting writes files, which needs root or the daemon's user (try sudo photolalactl restore --by-date ...); members of the group may only use --dry-run"))
            }
            throw .control(failure)
        } catch {
            throw .plan("\(error)")
        }
    }

    /// The export's start and end, for the daemon's audit trail (best effort: the export
    /// goes on if the daemon cannot take it).
    private func tell(_ report: ExportReport) {
        _ = try? client.send(.restoreExportReport, body: (try? ControlJSON.encode(report)) ?? [])
    }

    /// Redraws the bar (a terminal) or prints a line every 5 s (a log), and tells the
    /// daemon every second, until the export is over.
    private func reportLoop() {
        var lastLine = Date()
        var lastReport = Date.distantPast
        while !state.withLock({ $0.finished }) {
            let now = Date()
            let line = state.withLock { $0.tally.progress.line(now: now) }
            if tty {
                StandardError.write("\r\u{1B}[K" + line)
            } else if !request.json && now.timeIntervalSince(lastLine) >= 5 {
                StandardError.print(line)
                lastLine = now
            }
            if now.timeIntervalSince(lastReport) >= 1 {
                report(finished: false)
                lastReport = now
            }
            usleep(250_000)
        }
    }

    private func report(finished: Bool) {
        let (p, id) = state.withLock { ($0.tally.progress, $0.sessionId) }
        guard let id else { return }
        let r = RestoreReport(id: id, device: Self.label, filesDone: p.filesDone, filesTotal: p.filesTotal, bytesDone: max(p.bytesDone, p.bytesMoved),
                              bytesTotal: p.bytesTotal, waitingArchived: p.waitingArchived, archiveClass: p.archiveClass, finished: finished)
        _ = try? client.send(.restoreSession, body: (try? ControlJSON.encode(r)) ?? [])
    }

    /// A line of the human output (stdout); nothing with `--json`.
    private func say(_ line: String) {
        guard !request.json else { return }
        var bytes = Array((line + "\n").utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = retryingInterrupts { Glibc.write(1, raw.baseAddress! + offset, raw.count - offset) }
                guard n > 0 else { return }
                offset += n
            }
        }
    }
}
