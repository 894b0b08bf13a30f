#if canImport(Glibc)
import Glibc
#endif
import Control
import Foundation
import ManifestFormat
import PhotolalaCore
import Synchronization

/// `photolalactl restore`, the command's side: chooses the device, replays its manifest
/// up to `--as-of`, plans where every file goes, asks the daemon where the objects stand
/// (and archived ones back), then writes the files on `workers` threads, each object
/// streamed from the daemon over its own connection. Files are written with the rights of
/// whoever runs the command; the daemon only ever hands over bytes.
package final class RestoreRun: Sendable {
    package struct Request: Sendable, Equatable {
        package var device: String?
        package var asOf: Int64?
        package var asOfText: String?
        package var to: String?
        package var paths: [String]
        package var overwrite: Bool
        package var dryRun: Bool
        package var json: Bool
        package var workers: Int
        /// `--numeric-owner`, `--no-owners` (privacy.md "Owners and modes").
        package var owners: OwnerRule.Owners

        package init(device: String?, asOf: Int64?, asOfText: String?, to: String?, paths: [String], overwrite: Bool, dryRun: Bool,
                    json: Bool, workers: Int = 10, owners: OwnerRule.Owners = .byName) {
            self.device = device
            self.asOf = asOf
            self.asOfText = asOfText
            self.to = to
            self.paths = paths
            self.overwrite = overwrite
            self.dryRun = dryRun
            self.json = json
            self.workers = workers
            self.owners = owners
        }
    }

    package enum Stop: Error, CustomStringConvertible {
        case control(ControlClient.Failure)
        case plan(String)
        package var description: String {
            switch self {
            case .control(let f): f.description
            case .plan(let why): why
            }
        }
    }

    private let client: ControlClient
    private let request: Request
    /// Made again once the plan knows the folders' owners.
    private var writer: RestoreWriter { state.withLock { $0.writer } }
    private let interrupted: @Sendable () -> Bool
    private let state: Mutex<State>
    private let tty: Bool

    private struct State {
        var writer: RestoreWriter
        var tally = RestoreTally()
        var queue: [RestoreItem] = []
        var next = 0
        var sessionId: String?
        /// The device's name (or id), as the session shows it.
        var device = ""
        var finished = false
    }

    package init(client: ControlClient, request: Request, interrupted: @escaping @Sendable () -> Bool) {
        self.client = client
        self.request = request
        self.state = Mutex(State(writer: RestoreWriter(overwrite: request.overwrite, owners: request.owners)))
        self.interrupted = interrupted
        self.tty = isatty(2) == 1 && !request.json
    }

    /// Runs the restore; prints as it goes and returns the summary (its exit code is cli.md's).
    package func run() throws(Stop) -> RestoreSummary {
        do {
            return try runSession()
        } catch {
            // The daemon's session (and the audit trail) hears why it stopped.
            report(finished: true, outcome: .init(stopped: error.description))
            throw error
        }
    }

    private func runSession() throws(Stop) -> RestoreSummary {
        var streaming = client
        streaming.timeout = 120
        let devices: DeviceList
        do {
            devices = try streaming.call(.devices, as: DeviceList.self)
        } catch {
            throw .control(error)
        }
        let device: DeviceList.Device
        switch DeviceChoice.pick(request.device, from: devices) {
        case .success(let d): device = d
        case .failure(let f): throw .plan(f.description)
        }
        let label = device.name ?? device.id
        if !request.dryRun { try openSession(device: label, id: device.id) }
        var summary = RestoreSummary(device: .init(id: device.id, name: device.name), asOf: request.asOfText, dryRun: request.dryRun,
                                     files: 0, bytes: 0, restored: 0, alreadyThere: 0, kept: 0, failed: 0, waitingArchived: 0,
                                     problems: [], items: request.dryRun ? [] : nil, interrupted: false)
        let (replay, manifestProblems) = try readManifest(device.id)
        summary.problems += manifestProblems.map { .init(kind: "manifest", path: nil, message: $0) }
        let selected: [ManifestReplay.File]
        do {
            let picked = try RestorePlan.select(replay.files, filters: request.paths)
            selected = picked.files
            summary.problems += picked.unmatched.map { .init(kind: "filter", path: $0, message: "\($0): no file under it in the manifest of \(label)") }
        } catch {
            throw .plan(error.description)
        }
        // Nothing the bucket says chooses where a file goes: only --to, or this NAS's own watched folders.
        let watched = request.to == nil ? try watchedFolders() : []
        let plan = RestorePlan.plan(selected, deviceFolders: RestorePlan.deviceFolders(record: device.folders, files: replay.files),
                                    to: request.to, watched: watched)
        state.withLock { $0.writer = RestoreWriter(overwrite: request.overwrite, owners: request.owners, folderOwners: plan.folderOwners) }
        summary.problems += plan.refused.map { .init(kind: "refused", path: $0.subject, message: $0.reason) }
        let items = plan.items
        summary.files = items.count
        summary.bytes = items.reduce(0) { $0 + $1.version.size }
        say("\(request.dryRun ? "Would restore" : "Restoring") \(items.count) file\(items.count == 1 ? "" : "s") (\(Units.humanBytes(summary.bytes))) of \(label)"
            + (request.asOfText.map { " as of \($0)" } ?? "") + (request.to.map { " into \($0)" } ?? " to their original folders"))
        let bucket = devices.devices.reduce(Int64(0)) { $0 + $1.files }
        let statuses = try objectStatuses(Set(items.map(\.version.md5.hex)), thaw: !request.dryRun, bucketEstimate: bucket)
        if request.dryRun {
            dryRun(items, statuses: statuses, into: &summary)
        } else {
            restore(items, statuses: statuses, into: &summary)
            report(finished: true, outcome: .init(
                restored: summary.restored, alreadyThere: summary.alreadyThere, kept: summary.kept, failed: summary.failed,
                refused: summary.problems.filter { $0.kind == "refused" }.count, waitingArchived: summary.waitingArchived,
                interrupted: summary.interrupted))
        }
        return summary
    }

    // MARK: planning

    private func openSession(device: String, id: String) throws(Stop) {
        do {
            let opening = RestoreReport(device: device, deviceId: id, to: request.to, asOf: request.asOfText, paths: request.paths.count)
            let reply = try client.call(.restoreSession, body: try ControlJSON.encode(opening), as: RestoreSessionReply.self)
            state.withLock {
                $0.sessionId = reply.id
                $0.device = device
            }
        } catch let failure as ControlClient.Failure {
            if case .permissionDenied = failure {
                throw .control(.permissionDenied(hint: "permission denied: restoring writes files, which needs root or the daemon's user (try sudo photolalactl restore ...); members of the group may only use --dry-run"))
            }
            throw .control(failure)
        } catch {
            throw .plan("\(error)")
        }
    }

    /// This NAS's watched folders, as the daemon runs with them (its status), whatever
    /// config file this command was given.
    private func watchedFolders() throws(Stop) -> [String] {
        do {
            return try client.call(.status, as: DaemonStatus.self).watch.paths
        } catch {
            throw .control(error)
        }
    }

    /// The manifest, replayed up to `--as-of`; read again if compaction moved it meanwhile.
    private func readManifest(_ device: String) throws(Stop) -> (ManifestReplay, [String]) {
        var streaming = client
        streaming.timeout = 120
        for attempt in 1...3 {
            var replay = ManifestReplay(asOf: request.asOf)
            var frames = ManifestFrames.Reader()
            var report: ManifestReader.Report?
            var damaged: String?
            let answer: ControlClient.StreamAnswer
            do {
                answer = try streaming.stream(.manifest, query: ["device": device]) { bytes in
                    for frame in try frames.feed(bytes) {
                        switch frame {
                        case .segment(let object):
                            do {
                                let segment = try ManifestSegment.decode(object)
                                replay.apply(segment.entries)
                            } catch {
                                damaged = "a manifest segment arrived damaged (\(error))"
                            }
                        case .report(let r): report = r
                        }
                    }
                }
            } catch let failure as ControlClient.Failure {
                throw .control(failure)
            } catch {
                throw .plan("the manifest could not be read: \(error)")
            }
            guard (200..<300).contains(answer.status) else {
                throw .plan(answer.errorMessage ?? "the manifest could not be read (HTTP \(answer.status))")
            }
            if let damaged { throw .plan(damaged) }
            guard let report, answer.complete else { throw .plan("the manifest arrived cut short; run the command again") }
            if report.retry && attempt < 3 { continue }
            if report.segments == 0 { throw .plan(report.problems.first ?? "the device has no manifest") }
            return (replay, report.problems)
        }
        throw .plan("the manifest kept changing while it was read; run the command again")
    }

    // MARK: where the objects stand before any is read: from the bucket's listing when the
    // restore wants a good part of the bucket (a request per 1,000 objects), otherwise with
    // a HEAD per object; objects in an archive class are then asked after (and, for a real
    // run, asked back) one by one.

    /// `bucketEstimate`: the files the account's devices hold, an upper bound of the objects.
    private func objectStatuses(_ md5s: Set<String>, thaw: Bool, bucketEstimate: Int64) throws(Stop) -> [String: ObjectStatus] {
        guard !md5s.isEmpty else { return [:] }
        guard ObjectListing.worthListing(wanted: md5s.count, bucketEstimate: bucketEstimate) else {
            return try objectStatuses(md5s, thaw: thaw)
        }
        var listing = ObjectListing(wanted: md5s)
        var streaming = client
        streaming.timeout = 300
        let answer: ControlClient.StreamAnswer
        do {
            answer = try streaming.stream(.restoreListing) { try listing.feed($0) }
        } catch let failure as ControlClient.Failure {
            throw .control(failure)
        } catch {
            throw .plan("the bucket's listing could not be read: \(error)")
        }
        guard (200..<300).contains(answer.status) else {
            throw .plan(answer.errorMessage ?? "the bucket's listing could not be read (HTTP \(answer.status))")
        }
        guard answer.complete, listing.ended else { throw .plan("the bucket's listing arrived cut short; run the command again") }
        var out = listing.statuses
        let archived = Set(out.values.filter { $0.state == .archived }.map(\.md5))
        if !archived.isEmpty {
            for (md5, status) in try objectStatuses(archived, thaw: thaw) { out[md5] = status }
        }
        return out
    }

    /// Where each object stands, HEADs a batch at a time; `thaw` asks archived ones back.
    private func objectStatuses(_ md5s: Set<String>, thaw: Bool) throws(Stop) -> [String: ObjectStatus] {
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

    // MARK: the writing: worker threads take files one by one; objects still in an archive
    // class wait, asked after again and again, until they can be read.

    private func restore(_ items: [RestoreItem], statuses: [String: ObjectStatus], into summary: inout RestoreSummary) {
        var ready: [RestoreItem] = []
        var waiting: [RestoreItem] = []
        for item in items {
            switch statuses[item.version.md5.hex]?.state {
            case .ready?: ready.append(item)
            case .archived?, .restoring?, .unknown?: waiting.append(item)
            case .missing?, nil:
                summary.failed += 1
                summary.problems.append(.init(kind: "missing", path: item.displayPath,
                                              message: "\(item.displayPath): its object (\(item.version.md5.hex)) is not in the bucket"))
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
            say("\(waiting.count) file\(waiting.count == 1 ? "" : "s") wait\(waiting.count == 1 ? "s" : "") in \(archiveClass): asked back from the archive, \(ArchiveClass.typicalWait(archiveClass)); the restore waits for \(waiting.count == 1 ? "it" : "them") (stop it any time and run it again later)")
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

    /// Restores `items` on the worker threads; returns when all are done (or interrupted).
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
                    let outcome = self.restoreOne(item)
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

    /// One file: what is there decides; then its bytes, checked, put in place.
    private func restoreOne(_ item: RestoreItem) -> RestoreTally.Outcome {
        let parent: RestoreWriter.Parent
        do {
            parent = try writer.parent(of: item)
        } catch {
            return .failed(error.message)
        }
        var decision = ConflictRule.decide(writer.existing(in: parent), size: item.version.size, overwrite: request.overwrite)
        if decision == .compare {
            decision = ConflictRule.compared(sameBytes: writer.holds(item.version, in: parent), overwrite: request.overwrite)
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
                    if try incoming.commit(item.version, replace: decision == .replace) { return .restored }
                    // A file appeared at the name while this one arrived: it decides.
                    return writer.holds(item.version, in: parent) ? .alreadyThere : .kept("a file appeared there during the restore")
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
                return .failed("its object (\(item.version.md5.hex)) is not in the bucket")
            default:
                incoming.discard()
                lastError = answer.errorMessage ?? "HTTP \(answer.status)"
                if answer.status < 500 { return .failed(lastError) }
            }
        }
        return .failed(lastError)
    }

    // MARK: telling people and the daemon

    /// Redraws the bar (a terminal) or prints a line every 5 s (a log), and tells the
    /// daemon every second, until the restore is over.
    private func reportLoop() {
        // In a log the first line comes after 5 s: a quick restore prints none.
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

    /// `outcome`: the counts of a finished restore, for the daemon's audit trail.
    private func report(finished: Bool, outcome: RestoreReport.Outcome? = nil) {
        let (p, id, device) = state.withLock { ($0.tally.progress, $0.sessionId, $0.device) }
        guard let id else { return }
        let r = RestoreReport(id: id, device: device, filesDone: p.filesDone, filesTotal: p.filesTotal, bytesDone: max(p.bytesDone, p.bytesMoved),
                              bytesTotal: p.bytesTotal, waitingArchived: p.waitingArchived, archiveClass: p.archiveClass, finished: finished,
                              outcome: outcome)
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

    // MARK: dry run

    private func dryRun(_ items: [RestoreItem], statuses: [String: ObjectStatus], into summary: inout RestoreSummary) {
        for item in items {
            let status = statuses[item.version.md5.hex]
            var action: String
            switch status?.state {
            case .missing?, nil:
                action = "missing"
                summary.failed += 1
                summary.problems.append(.init(kind: "missing", path: item.displayPath, message: "\(item.displayPath): its object is not in the bucket"))
            case .archived?, .restoring?:
                action = "waitArchived"
                summary.waitingArchived += 1
            default:
                action = "restore"
            }
            if action != "missing" {
                switch RestoreWriter.inspect(item, overwrite: request.overwrite) {
                case .alreadyThere:
                    action = "alreadyThere"
                    summary.alreadyThere += 1
                case .keep(let why):
                    action = "keep"
                    summary.kept += 1
                    summary.problems.append(.init(kind: "kept", path: item.displayPath, message: "\(item.displayPath): \(why)"))
                default:
                    break
                }
            }
            summary.items?.append(.init(path: item.displayPath, size: item.version.size, md5: item.version.md5.hex, action: action,
                                        storageClass: status?.storageClass))
            say("\(action.padding(toLength: 13, withPad: " ", startingAt: 0)) \(Units.humanBytes(item.version.size).padding(toLength: 9, withPad: " ", startingAt: 0)) \(item.displayPath)")
        }
        // An archived object is asked back at the real run; a dry run only counts it.
        summary.restored = 0
    }
}
