#if canImport(Glibc)
import Glibc
#endif
import Control
import Digests
import Foundation
import PhotolalaCore
import RestoreFiles
import RestoreWire
import Synchronization

/// The writing that `restore` and `restore --by-date` share, in one task group: up to
/// `workers` files downloading at once, each object streamed from the daemon over its own
/// connection into a temporary file; each file then read back in `OpenFileLanes`' SIMD
/// lanes while the next ones download, checked and put in place; objects still in an
/// archive class asked after again and again until they can be read; every quarter of a
/// second the bar drawn and, every second, the daemon told. The group's body owns every
/// count: a child task hands back what became of its file, so nothing is shared but the
/// bytes received so far (one atomic counter). The blocking calls go through
/// `BlockingCalls`. One copy, so a fix to how a file is fetched, retried or counted
/// reaches both commands.
struct TransferWorkers: Sendable {
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

    /// The daemon's session of the run (`status` shows it), once opened.
    struct Session: Sendable {
        var id: String
        /// The device's name (or id), as the session shows it.
        var device: String
    }

    private let client: ControlClient
    private let rules: Rules
    private let json: Bool
    private let tty: Bool
    private let interrupted: @Sendable () -> Bool
    private let io: BlockingCalls

    /// Files downloaded but not yet put in place, at most: each holds two descriptors, and
    /// past this the run puts files in place before it downloads another.
    private static let maxAwaiting = 32

    init(client: ControlClient, rules: Rules, json: Bool, io: BlockingCalls, interrupted: @escaping @Sendable () -> Bool) {
        self.client = client
        self.rules = rules
        self.json = json
        self.tty = isatty(2) == 1 && !json
        self.io = io
        self.interrupted = interrupted
    }

    /// A file downloaded whole into its temporary file, on its way to `OpenFileLanes` and
    /// back: one task at a time holds it (the one that wrote it, then the one that puts it
    /// in place, while the lanes' thread only reads its descriptor).
    private struct Downloaded: Sendable {
        let item: RestoreItem
        let incoming: IncomingFile
        let parent: RestoreWriter.Parent
        let replace: Bool
    }

    /// What one try at a file's bytes came to.
    private enum Fetched: Sendable {
        case done(RestoreTally.Outcome)
        case downloaded(Downloaded)
        /// Worth another try (the connection broke, the daemon answered 5xx): why.
        case again(String)
    }

    /// What the group's children hand back to its body.
    private enum Event: Sendable {
        /// A file arrived whole in its temporary file: next, its digests and its place.
        case downloaded(Downloaded)
        /// What became of a file, and whether it was downloading (else being put in place).
        case finished(RestoreItem, RestoreTally.Outcome, downloading: Bool)
        /// A quarter of a second passed.
        case tick
        /// The daemon was told how far the run is.
        case told
        /// Where the archived objects stand now (nil: the daemon could not say).
        case archive([String: ObjectStatus]?)
    }

    /// Bytes received so far, files still arriving included: added to by the downloads on
    /// their threads, read by the bar.
    private final class Received: Sendable {
        private let bytes = Atomic<Int64>(0)
        func add(_ n: Int) { bytes.add(Int64(n), ordering: .relaxed) }
        var total: Int64 { bytes.load(ordering: .relaxed) }
    }

    /// Writes `items` through `writer` and puts what became of them in `summary`; returns
    /// the counts, for the daemon's session. `tell` tells the session how far the run is,
    /// every second until the last file is done.
    func write<Summary: TransferCounts>(_ items: [RestoreItem], statuses: [String: ObjectStatus], writer: RestoreWriter,
                                        tell: @escaping @Sendable (RestoreProgress) async -> Void, into summary: inout Summary) async -> RestoreProgress {
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
        var tally = RestoreTally()
        tally.progress = RestoreProgress(filesTotal: items.count, bytesTotal: items.reduce(0) { $0 + $1.version.size })
        tally.progress.failed = summary.failed
        tally.progress.waitingArchived = waiting.count
        tally.progress.archiveClass = archiveClass
        if let archiveClass, !waiting.isEmpty {
            say("\(waiting.count) file\(waiting.count == 1 ? "" : "s") wait\(waiting.count == 1 ? "s" : "") in \(archiveClass): asked back from the archive, "
                + "\(ArchiveClass.typicalWait(archiveClass)); the \(rules.noun) waits for \(waiting.count == 1 ? "it" : "them") (stop it any time and run it again later)")
        }
        let archive = await transfer(ready, waiting: waiting, writer: writer, tally: &tally, tell: tell)
        let folderProblems = await io.run { writer.finish() } ?? []
        if tty { StandardError.write("\r\u{1B}[K") }
        summary.restored = tally.progress.restored
        summary.alreadyThere = tally.progress.alreadyThere
        summary.kept = tally.progress.kept
        summary.failed = tally.progress.failed
        summary.waitingArchived = archive.waiting.count
        summary.problems += tally.problems + folderProblems.map { .init(kind: "failed", path: nil, message: $0) }
        summary.interrupted = interrupted()
        return tally.progress
    }

    /// The task group: returns once every file is in place, failed, or waits in an archive
    /// class still when the run was interrupted (a Ctrl-C starts no new download; the
    /// files already downloaded are still checked and put in place). Returns the files
    /// still waiting in an archive class.
    private func transfer(_ ready: [RestoreItem], waiting: [RestoreItem], writer: RestoreWriter, tally: inout RestoreTally,
                          tell: @escaping @Sendable (RestoreProgress) async -> Void) async -> ArchiveWait {
        let lanes = OpenFileLanes()
        let received = Received()
        var archive = ArchiveWait(waiting)
        await withTaskGroup(of: Event.self) { group in
            var queue = ready[...]
            var downloading = 0
            var placing = 0
            var asking = false
            var telling = false
            var nextQuestion: Date?
            var counted: Int64 = 0
            // In a log the first line comes after 5 s: a quick run prints none.
            var lastLine = Date()
            var lastTold = Date.distantPast

            func startDownloads() {
                while downloading < max(1, rules.workers) && placing < Self.maxAwaiting && !interrupted(), let item = queue.popFirst() {
                    downloading += 1
                    group.addTask { await self.download(item, writer, received) }
                }
            }
            /// The files that could be read are in place: the archived ones are asked after
            /// (after 2 s, doubling), and again once those that came back are in place.
            func askAfterArchived() {
                guard downloading == 0, placing == 0, queue.isEmpty, !archive.waiting.isEmpty, !asking, !interrupted() else { return }
                let due = nextQuestion ?? Date().addingTimeInterval(archive.nextWait())
                nextQuestion = due
                guard Date() >= due else { return }
                nextQuestion = nil
                asking = true
                let md5s = archive.md5s
                group.addTask { .archive(await self.io.run { try? self.objectStatuses(md5s, thaw: true) } ?? nil) }
            }
            func finished() -> Bool {
                downloading == 0 && placing == 0 && (interrupted() || (queue.isEmpty && archive.waiting.isEmpty && !asking))
            }

            startDownloads()
            askAfterArchived()
            group.addTask { await Self.quarterSecond() }
            while !finished(), let event = await group.next() {
                switch event {
                case .downloaded(let file):
                    downloading -= 1
                    placing += 1
                    group.addTask { .finished(file.item, await self.putInPlace(file, lanes, writer), downloading: false) }
                case .finished(let item, let outcome, let wasDownloading):
                    if wasDownloading { downloading -= 1 } else { placing -= 1 }
                    tally.record(item, outcome)
                case .told:
                    telling = false
                case .archive(let statuses):
                    asking = false
                    guard let statuses, !interrupted() else { break }
                    let (nowReady, gaveUp) = archive.answered(statuses)
                    for (item, why) in gaveUp {
                        tally.progress.failed += 1
                        tally.problems.append(.init(kind: "failed", path: item.displayPath, message: "\(item.displayPath): \(why)"))
                    }
                    tally.progress.waitingArchived = archive.waiting.count
                    queue.append(contentsOf: nowReady)
                case .tick:
                    let now = Date()
                    let total = received.total
                    tally.progress.moved(total - counted, now: now)
                    counted = total
                    let line = tally.progress.line(now: now)
                    if tty {
                        StandardError.write("\r\u{1B}[K" + line)
                    } else if !json && now.timeIntervalSince(lastLine) >= 5 {
                        StandardError.print(line)
                        lastLine = now
                    }
                    if now.timeIntervalSince(lastTold) >= 1 && !telling {
                        telling = true
                        lastTold = now
                        let progress = tally.progress
                        group.addTask {
                            await tell(progress)
                            return .told
                        }
                    }
                    group.addTask { await Self.quarterSecond() }
                }
                startDownloads()
                askAfterArchived()
            }
            // What is left: the next tick's wait, a report or a question on its way.
            group.cancelAll()
        }
        await io.run { lanes.shutdown() }
        return archive
    }

    private static func quarterSecond() async -> Event {
        try? await Task.sleep(for: .milliseconds(250))
        return .tick
    }

    // MARK: one file

    /// One file's bytes into its temporary file: what stands at its place decides first (the
    /// same bytes: nothing to do); then three tries, 1 and 2 s apart.
    private func download(_ item: RestoreItem, _ writer: RestoreWriter, _ received: Received) async -> Event {
        guard let prepared = await io.run({ self.prepare(item, writer) }) else {
            return .finished(item, .failed("the \(rules.noun) stopped before this file"), downloading: true)
        }
        let parent: RestoreWriter.Parent
        let replace: Bool
        switch prepared {
        case .failure(let settled): return .finished(item, settled.outcome, downloading: true)
        case .success(let place): (parent, replace) = (place.parent, place.replace)
        }
        var lastError = ""
        for attempt in 0..<3 {
            if attempt > 0 { try? await Task.sleep(for: .seconds(attempt)) }
            switch await io.run({ self.fetch(item, into: parent, replace: replace, writer, received) }) ?? .again("the \(rules.noun) stopped") {
            case .done(let outcome): return .finished(item, outcome, downloading: true)
            case .downloaded(let file): return .downloaded(file)
            case .again(let why): lastError = why
            }
        }
        return .finished(item, .failed(lastError), downloading: true)
    }

    /// Where a file goes and whether what is there is replaced; or what became of it already.
    private struct Place: Sendable {
        var parent: RestoreWriter.Parent
        var replace: Bool
    }

    private struct Settled: Error {
        var outcome: RestoreTally.Outcome
    }

    /// Blocking: the file's folder opened (created where missing), and what stands at its name.
    private func prepare(_ item: RestoreItem, _ writer: RestoreWriter) -> Result<Place, Settled> {
        let parent: RestoreWriter.Parent
        do {
            parent = try writer.parent(of: item)
        } catch {
            return .failure(Settled(outcome: .failed(error.message)))
        }
        var decision = ConflictRule.decide(writer.existing(in: parent), size: item.version.size, overwrite: rules.overwrite)
        if decision == .compare {
            decision = ConflictRule.compared(sameBytes: writer.holds(item.version, in: parent), overwrite: rules.overwrite)
        }
        switch decision {
        case .alreadyThere: return .failure(Settled(outcome: .alreadyThere))
        case .keep(let why): return .failure(Settled(outcome: .kept(why)))
        case .write, .replace, .compare: return .success(Place(parent: parent, replace: decision == .replace))
        }
    }

    /// Blocking: one try at the object, streamed from the daemon into a new temporary file.
    private func fetch(_ item: RestoreItem, into parent: RestoreWriter.Parent, replace: Bool, _ writer: RestoreWriter,
                       _ received: Received) -> Fetched {
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
                received.add(bytes.count)
            }
        } catch let failure as RestoreWriter.Failure {
            incoming.discard()
            return .done(.failed(failure.message))
        } catch {
            incoming.discard()
            return .again("\(error)")
        }
        switch answer.status {
        case 200 where answer.complete:
            return .downloaded(Downloaded(item: item, incoming: incoming, parent: parent, replace: replace))
        case 200:
            incoming.discard()
            return .again("the daemon stopped sending after \(answer.received) of \(item.version.size) bytes")
        case 409:
            incoming.discard()
            return .done(.archived)
        case 404:
            incoming.discard()
            return .done(.failed(gone(item)))
        default:
            incoming.discard()
            let why = answer.errorMessage ?? "HTTP \(answer.status)"
            return answer.status < 500 ? .done(.failed(why)) : .again(why)
        }
    }

    /// A downloaded file read back in the lanes, then checked against its version and put
    /// in place.
    private func putInPlace(_ file: Downloaded, _ lanes: OpenFileLanes, _ writer: RestoreWriter) async -> RestoreTally.Outcome {
        let digests = await lanes.digests(fd: file.incoming.descriptor, size: file.item.version.size, sha256: file.incoming.wantsSHA256)
        return await io.run { self.commit(file, digests, writer) } ?? .failed("the \(rules.noun) stopped before this file was put in place")
    }

    /// Blocking: the digests checked, the file given its owner, mode and time, synced and renamed.
    private func commit(_ file: Downloaded, _ digests: OpenFileLanes.Result, _ writer: RestoreWriter) -> RestoreTally.Outcome {
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

    private func gone(_ item: RestoreItem) -> String {
        "its object (\(item.version.md5.hex)) \(rules.gone)"
    }

    // MARK: asking the daemon (blocking: called through `io`)

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

    /// Opens the daemon's session, which `status` shows. Only root and the daemon's user
    /// may: anyone else is told `denied`, in the command's own words.
    func openSession(_ opening: RestoreReport, denied: String) throws(RestoreRun.Stop) -> Session {
        do {
            return Session(id: try client.call(.restoreSession, body: try ControlJSON.encode(opening), as: RestoreSessionReply.self).id,
                           device: opening.device)
        } catch let failure as ControlClient.Failure {
            if case .permissionDenied = failure { throw .control(.permissionDenied(hint: denied)) }
            throw .control(failure)
        } catch {
            throw .plan("\(error)")
        }
    }

    /// Tells the daemon's session (nil: none was opened) how far the run is; best effort,
    /// the run goes on if the daemon cannot take it.
    func tell(_ session: Session?, _ p: RestoreProgress, finished: Bool, outcome: RestoreReport.Outcome? = nil) async {
        guard let session else { return }
        let r = RestoreReport(id: session.id, device: session.device, filesDone: p.filesDone, filesTotal: p.filesTotal,
                              bytesDone: max(p.bytesDone, p.bytesMoved), bytesTotal: p.bytesTotal, waitingArchived: p.waitingArchived,
                              archiveClass: p.archiveClass, finished: finished, outcome: outcome)
        let client = self.client
        _ = await io.run { _ = try? client.send(.restoreSession, body: (try? ControlJSON.encode(r)) ?? []) }
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
