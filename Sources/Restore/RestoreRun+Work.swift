#if canImport(Glibc)
import Glibc
#endif
import Control
import Foundation
import Manifest
import PhotolalaCore

/// The writing: worker threads take files one by one; objects still in an archive class
/// wait, asked after again and again, until they can be read.
extension RestoreRun {
    enum Outcome {
        case restored
        case alreadyThere
        case kept(String)
        case failed(String)
        /// The object turned out to be in an archive class after all.
        case archived
    }

    func restore(_ items: [RestoreItem], statuses: [String: ObjectStatus], into summary: inout RestoreSummary) {
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
            $0.progress = RestoreProgress(filesTotal: items.count, bytesTotal: items.reduce(0) { $0 + $1.version.size })
            $0.progress.failed = summary.failed
            $0.progress.waitingArchived = waiting.count
            $0.progress.archiveClass = archiveClass
        }
        if let archiveClass, !waiting.isEmpty {
            say("\(waiting.count) file\(waiting.count == 1 ? "" : "s") wait\(waiting.count == 1 ? "s" : "") in \(archiveClass): asked back from the archive, \(ArchiveClass.typicalWait(archiveClass)); the restore waits for \(waiting.count == 1 ? "it" : "them") (stop it any time and run it again later)")
        }
        let reporter = Thread { self.reportLoop() }
        reporter.start()
        work(ready)
        var poll = Backoff(base: 2, cap: 900, jitter: .none)
        var unknownRounds = 0
        while !waiting.isEmpty && !interrupted() {
            let wait = poll.fail(random: 0)
            let until = Date().addingTimeInterval(wait)
            while Date() < until && !interrupted() { usleep(200_000) }
            guard !interrupted(), let now = try? objectStatuses(Set(waiting.map(\.version.md5.hex)), thaw: true) else { continue }
            let unknown = waiting.filter { now[$0.version.md5.hex]?.state == .unknown }
            unknownRounds = unknown.isEmpty ? 0 : unknownRounds + 1
            let missing = waiting.filter { now[$0.version.md5.hex]?.state == .missing || now[$0.version.md5.hex] == nil }
            let nowReady = waiting.filter { now[$0.version.md5.hex]?.state == .ready }
            var gaveUp: [RestoreItem] = missing
            if unknownRounds >= 5 { gaveUp += unknown }
            waiting = waiting.filter { w in !nowReady.contains(w) && !gaveUp.contains(w) }
            state.withLock { s in
                for item in gaveUp {
                    s.progress.failed += 1
                    let why = now[item.version.md5.hex]?.message ?? "its object (\(item.version.md5.hex)) is not in the bucket"
                    s.problems.append(.init(kind: "failed", path: item.displayPath, message: "\(item.displayPath): \(why)"))
                }
                s.progress.waitingArchived = waiting.count
            }
            if !nowReady.isEmpty {
                poll.reset()
                work(nowReady)
            }
        }
        state.withLock { $0.finished = true }
        while reporter.isExecuting { usleep(10_000) }
        let folderProblems = writer.finish()
        if tty { StandardError.write("\r\u{1B}[K") }
        let s = state.withLock { $0 }
        summary.restored = s.progress.restored
        summary.alreadyThere = s.progress.alreadyThere
        summary.kept = s.progress.kept
        summary.failed = s.progress.failed
        summary.waitingArchived = waiting.count
        summary.problems += s.problems + folderProblems.map { .init(kind: "failed", path: nil, message: $0) }
        summary.interrupted = interrupted()
    }

    /// Restores `items` on the worker threads; returns when all are done (or interrupted).
    func work(_ items: [RestoreItem]) {
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
                    self.finish(item, self.restoreOne(item))
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

    private func finish(_ item: RestoreItem, _ outcome: Outcome) {
        state.withLock { s in
            switch outcome {
            case .restored:
                s.progress.restored += 1
                s.progress.bytesDone += item.version.size
            case .alreadyThere:
                s.progress.alreadyThere += 1
                s.progress.bytesDone += item.version.size
            case .kept(let why):
                s.progress.kept += 1
                s.problems.append(.init(kind: "kept", path: item.displayPath, message: "\(item.displayPath): \(why)"))
            case .failed(let why):
                s.progress.failed += 1
                s.problems.append(.init(kind: "failed", path: item.displayPath, message: "\(item.displayPath): \(why)"))
            case .archived:
                s.progress.failed += 1
                s.problems.append(.init(kind: "failed", path: item.displayPath,
                                        message: "\(item.displayPath): its object went back to an archive class; run the command again"))
            }
        }
    }

    /// One file: what is there decides; then its bytes, checked, put in place.
    func restoreOne(_ item: RestoreItem) -> Outcome {
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
                    self.state.withLock { $0.progress.moved(Int64(bytes.count), now: Date()) }
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

    /// Redraws the bar (a terminal) or prints a line every 5 s (a log), and tells the
    /// daemon every second, until the restore is over.
    func reportLoop() {
        // In a log the first line comes after 5 s: a quick restore prints none.
        var lastLine = Date()
        var lastReport = Date.distantPast
        while !state.withLock({ $0.finished }) {
            let now = Date()
            let line = state.withLock { $0.progress.line(now: now) }
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

    func report(finished: Bool) {
        let (p, id, device) = state.withLock { ($0.progress, $0.sessionId, $0.device) }
        guard let id else { return }
        let r = RestoreReport(id: id, device: device, filesDone: p.filesDone, filesTotal: p.filesTotal, bytesDone: max(p.bytesDone, p.bytesMoved),
                              bytesTotal: p.bytesTotal, waitingArchived: p.waitingArchived, archiveClass: p.archiveClass, finished: finished)
        _ = try? client.send(.restoreSession, body: (try? ControlJSON.encode(r)) ?? [])
    }

    // MARK: dry run

    func dryRun(_ items: [RestoreItem], statuses: [String: ObjectStatus], into summary: inout RestoreSummary) {
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
