#if canImport(Glibc)
import Glibc
#endif
import Control
import Digests
import Foundation
import PhotolalaCore
import Synchronization

/// The writing that `restore` and `restore --by-date` share: worker threads take files one
/// by one, each object streamed from the daemon over its own connection; objects still in
/// an archive class wait, asked after again and again, until they can be read; a reporter
/// thread draws the bar and tells the daemon. One copy, so a fix to how a file is fetched,
/// retried or counted reaches both commands.
final class TransferWorkers: Sendable {
    /// Where the two commands differ: their words, and whether a file there may be replaced.
    struct Rules: Sendable {
        /// `restore` or `export`, as the messages name the run.
        var noun: String
        /// What is said of an object the bucket does not hold, after "its object (md5) ".
        var gone: String
        /// `--overwrite`; an export never replaces a file.
        var overwrite: Bool
        var workers: Int
    }

    private let client: ControlClient
    private let rules: Rules
    private let json: Bool
    private let tty: Bool
    private let interrupted: @Sendable () -> Bool
    private let state = Mutex(State())

    private struct State {
        var tally = RestoreTally()
        var queue: [RestoreItem] = []
        var next = 0
        var finished = false
        /// Files downloaded whole and not yet put in place (being read back, or read back).
        var awaiting = 0
        /// Files read back, with their digests, for the next free worker to put in place.
        var verified: [(Downloaded, OpenFileLanes.Result)] = []
    }

    /// A file downloaded whole into its temporary file, on its way to `OpenFileLanes` and
    /// back: one thread at a time holds it (the worker that wrote it, the hashing thread,
    /// which only reads its descriptor, then the worker that puts it in place).
    private struct Downloaded: Sendable {
        let item: RestoreItem
        let incoming: IncomingFile
        let parent: RestoreWriter.Parent
        let replace: Bool
    }

    /// What a worker made of one file: done, or downloaded and waiting for its digests.
    private enum Step {
        case done(RestoreTally.Outcome)
        case downloaded(Downloaded)
    }

    /// Files downloaded but not yet put in place, at most: each holds two descriptors, and
    /// past this a worker puts files in place before it downloads another.
    private static let maxAwaiting = 32
    private let verifiedSignal = DispatchSemaphore(value: 0)

    init(client: ControlClient, rules: Rules, json: Bool, interrupted: @escaping @Sendable () -> Bool) {
        self.client = client
        self.rules = rules
        self.json = json
        self.tty = isatty(2) == 1 && !json
        self.interrupted = interrupted
    }

    /// The counts so far, for the daemon's session.
    var progress: RestoreProgress { state.withLock { $0.tally.progress } }

    /// Writes `items` through `writer` and puts what became of them in `summary`. `report`
    /// tells the daemon's session, every second until the last file is done.
    func write<Summary: TransferCounts>(_ items: [RestoreItem], statuses: [String: ObjectStatus], writer: RestoreWriter,
                                        report: @escaping @Sendable () -> Void, into summary: inout Summary) {
        var ready: [RestoreItem] = []
        var waiting: [RestoreItem] = []
        for item in items {
            switch statuses[item.version.md5.hex]?.state {
            case .ready?: ready.append(item)
            case .archived?, .restoring?, .unknown?: waiting.append(item)
            case .missing?, nil:
                summary.failed += 1
                summary.problems.append(.init(kind: "missing", path: item.displayPath, message: "\(item.displayPath): \(gone(item))"))
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
                + "\(ArchiveClass.typicalWait(archiveClass)); the \(rules.noun) waits for \(waiting.count == 1 ? "it" : "them") (stop it any time and run it again later)")
        }
        let reporter = Thread { self.reportLoop(report) }
        reporter.start()
        work(ready, writer)
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
            if !nowReady.isEmpty { work(nowReady, writer) }
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

    /// Where each object stands, HEADs a batch at a time; `thaw` asks archived ones back.
    func objectStatuses(_ md5s: Set<String>, thaw: Bool) throws(RestoreRun.Stop) -> [String: ObjectStatus] {
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

    /// Opens the daemon's session, which `status` shows; returns its id. Only root and the
    /// daemon's user may: anyone else is told `denied`, in the command's own words.
    func openSession(_ opening: RestoreReport, denied: String) throws(RestoreRun.Stop) -> String {
        do {
            return try client.call(.restoreSession, body: try ControlJSON.encode(opening), as: RestoreSessionReply.self).id
        } catch let failure as ControlClient.Failure {
            if case .permissionDenied = failure { throw .control(.permissionDenied(hint: denied)) }
            throw .control(failure)
        } catch {
            throw .plan("\(error)")
        }
    }

    /// Tells the daemon's session `id` (nil: none was opened) how far the run is; best
    /// effort, the run goes on if the daemon cannot take it.
    func tell(session id: String?, device: String, finished: Bool, outcome: RestoreReport.Outcome? = nil) {
        guard let id else { return }
        let p = progress
        let r = RestoreReport(id: id, device: device, filesDone: p.filesDone, filesTotal: p.filesTotal, bytesDone: max(p.bytesDone, p.bytesMoved),
                              bytesTotal: p.bytesTotal, waitingArchived: p.waitingArchived, archiveClass: p.archiveClass, finished: finished,
                              outcome: outcome)
        _ = try? client.send(.restoreSession, body: (try? ControlJSON.encode(r)) ?? [])
    }

    // MARK: a dry run, which writes nothing: only looks at what stands at each file's place

    /// What a dry run would find at `item`'s place, counted in `summary`: `alreadyThere`,
    /// `keep`, or nil when the file would be written.
    static func lookedAt<Summary: TransferCounts>(_ item: RestoreItem, overwrite: Bool, into summary: inout Summary) -> String? {
        switch RestoreWriter.inspect(item, overwrite: overwrite) {
        case .alreadyThere:
            summary.alreadyThere += 1
            return "alreadyThere"
        case .keep(let why):
            summary.kept += 1
            summary.problems.append(.init(kind: "kept", path: item.displayPath, message: "\(item.displayPath): \(why)"))
            return "keep"
        default:
            return nil
        }
    }

    /// A dry run's line for one file, in columns.
    func say(_ action: String, _ item: RestoreItem) {
        say("\(action.padding(toLength: 13, withPad: " ", startingAt: 0)) \(Units.humanBytes(item.version.size).padding(toLength: 9, withPad: " ", startingAt: 0)) \(item.displayPath)")
    }

    /// A line of the human output (stdout); nothing with `--json`.
    func say(_ line: String) {
        guard !json else { return }
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

    private func gone(_ item: RestoreItem) -> String {
        "its object (\(item.version.md5.hex)) \(rules.gone)"
    }

    /// Writes `items` on the worker threads; returns when all are done (or interrupted).
    /// Each worker downloads a file, hands it to `lanes` to be read back and hashed, and
    /// goes on with the next; whichever worker is free puts hashed files in place. A file
    /// downloaded before an interruption is still checked and put in place.
    private func work(_ items: [RestoreItem], _ writer: RestoreWriter) {
        state.withLock {
            $0.queue = items
            $0.next = 0
        }
        let lanes = OpenFileLanes()
        let group = DispatchGroup()
        for _ in 0..<max(1, min(rules.workers, items.count)) {
            group.enter()
            Thread {
                defer { group.leave() }
                self.workLoop(writer, lanes)
            }.start()
        }
        group.wait()
        lanes.shutdown()
    }

    private func workLoop(_ writer: RestoreWriter, _ lanes: OpenFileLanes) {
        while true {
            let (ready, awaiting) = state.withLock { s in (s.verified.isEmpty ? nil : s.verified.removeFirst(), s.awaiting) }
            if let (file, digests) = ready {
                let outcome = putInPlace(file, digests, writer)
                state.withLock {
                    $0.tally.record(file.item, outcome)
                    $0.awaiting -= 1
                }
                continue
            }
            if awaiting < Self.maxAwaiting, !interrupted(), let item = take() {
                switch writeOne(item, writer) {
                case .done(let outcome):
                    state.withLock { $0.tally.record(item, outcome) }
                case .downloaded(let file):
                    state.withLock { $0.awaiting += 1 }
                    lanes.submit(fd: file.incoming.descriptor, size: file.item.version.size, sha256: file.incoming.wantsSHA256) { result in
                        self.state.withLock { $0.verified.append((file, result)) }
                        self.verifiedSignal.signal()
                    }
                }
                continue
            }
            if awaiting == 0 && (interrupted() || state.withLock({ $0.next >= $0.queue.count })) { return }
            _ = verifiedSignal.wait(timeout: .now() + 0.2)
        }
    }

    /// A downloaded file, once read back: checked against its version and put in place.
    private func putInPlace(_ file: Downloaded, _ digests: OpenFileLanes.Result, _ writer: RestoreWriter) -> RestoreTally.Outcome {
        let readBack: OpenFileDigests
        switch digests {
        case .success(let d): readBack = d
        case .failure(let why):
            file.incoming.discard()
            return .failed("the file written could not be read back to check it (\(why)): not restored")
        }
        do {
            if try file.incoming.commit(file.item.version, replace: file.replace, readBack: readBack) { return .restored }
            // A file appeared at the name while this one arrived: it decides.
            return writer.holds(file.item.version, in: file.parent) ? .alreadyThere : .kept("a file appeared there during the \(rules.noun)")
        } catch {
            return .failed(error.message)
        }
    }

    private func take() -> RestoreItem? {
        state.withLock { s in
            guard s.next < s.queue.count else { return nil }
            defer { s.next += 1 }
            return s.queue[s.next]
        }
    }

    /// One file: what is there decides (the same bytes: nothing to do); then its bytes,
    /// checked, put in place.
    private func writeOne(_ item: RestoreItem, _ writer: RestoreWriter) -> Step {
        let parent: RestoreWriter.Parent
        do {
            parent = try writer.parent(of: item)
        } catch {
            return .done(.failed(error.message))
        }
        var decision = ConflictRule.decide(writer.existing(in: parent), size: item.version.size, overwrite: rules.overwrite)
        if decision == .compare {
            decision = ConflictRule.compared(sameBytes: writer.holds(item.version, in: parent), overwrite: rules.overwrite)
        }
        switch decision {
        case .alreadyThere: return .done(.alreadyThere)
        case .keep(let why): return .done(.kept(why))
        case .write, .replace, .compare: break
        }
        var lastError = ""
        for attempt in 0..<3 {
            if attempt > 0 { sleep(UInt32(attempt)) }
            let incoming: IncomingFile
            do {
                incoming = try writer.incoming(in: parent, sha256: item.version.sha256 != nil)
            } catch {
                return .done(.failed(error.message))
            }
            let answer: ControlClient.StreamAnswer
            do {
                var streaming = client
                streaming.timeout = 120
                answer = try streaming.stream(.restoreObject, query: ["md5": item.version.md5.hex, "size": "\(item.version.size)"]) { bytes in
                    // Never a byte past the size the manifest (an export: the listing)
                    // gives, whatever the daemon sends: the bucket is untrusted, and the
                    // daemon may be of another release.
                    guard incoming.written + Int64(bytes.count) <= item.version.size else {
                        throw RestoreWriter.Failure("its object photos/…/\(item.version.md5.hex).dat holds more than the \(item.version.size) bytes expected: it was replaced in the bucket; not \(self.rules.noun == "export" ? "exported" : "restored")")
                    }
                    try incoming.append(bytes)
                    self.state.withLock { $0.tally.progress.moved(Int64(bytes.count), now: Date()) }
                }
            } catch let failure as RestoreWriter.Failure {
                incoming.discard()
                return .done(.failed(failure.message))
            } catch {
                incoming.discard()
                lastError = "\(error)"
                continue
            }
            switch answer.status {
            case 200 where answer.complete:
                return .downloaded(Downloaded(item: item, incoming: incoming, parent: parent, replace: decision == .replace))
            case 200:
                incoming.discard()
                lastError = "the daemon stopped sending after \(answer.received) of \(item.version.size) bytes"
            case 409:
                incoming.discard()
                return .done(.archived)
            case 404:
                incoming.discard()
                return .done(.failed(gone(item)))
            default:
                incoming.discard()
                lastError = answer.errorMessage ?? "HTTP \(answer.status)"
                if answer.status < 500 { return .done(.failed(lastError)) }
            }
        }
        return .done(.failed(lastError))
    }

    /// Redraws the bar (a terminal) or prints a line every 5 s (a log), and tells the
    /// daemon every second, until the run is over.
    private func reportLoop(_ report: @Sendable () -> Void) {
        // In a log the first line comes after 5 s: a quick run prints none.
        var lastLine = Date()
        var lastReport = Date.distantPast
        while !state.withLock({ $0.finished }) {
            let now = Date()
            let line = state.withLock { $0.tally.progress.line(now: now) }
            if tty {
                StandardError.write("\r\u{1B}[K" + line)
            } else if !json && now.timeIntervalSince(lastLine) >= 5 {
                StandardError.print(line)
                lastLine = now
            }
            if now.timeIntervalSince(lastReport) >= 1 {
                report()
                lastReport = now
            }
            usleep(250_000)
        }
    }
}

/// The counts a summary takes from the writing: a restore's and an export's have the same.
protocol TransferCounts {
    var restored: Int { get set }
    var alreadyThere: Int { get set }
    var kept: Int { get set }
    var failed: Int { get set }
    var waitingArchived: Int { get set }
    var problems: [RestoreSummary.Problem] { get set }
    var interrupted: Bool { get set }
}

extension RestoreSummary: TransferCounts {}
extension ExportSummary: TransferCounts {}
