import Control
import PhotolalaCore
import RestoreFiles
import RestoreWire

/// What a restore has done so far, file by file: the counts the bar shows and the problems
/// the summary lists. The worker threads share one, under a lock, each adding what became
/// of its file.
package struct RestoreTally: Sendable {
    enum Outcome: Sendable, Equatable {
        case restored
        case alreadyThere
        case kept(String)
        case failed(String)
        /// The object turned out to be in an archive class after all.
        case archived
    }

    var progress = RestoreProgress()
    var problems: [RestoreSummary.Problem] = []

    mutating func record(_ item: RestoreItem, _ outcome: Outcome) {
        switch outcome {
        case .restored:
            progress.restored += 1
            progress.bytesDone += item.version.size
        case .alreadyThere:
            progress.alreadyThere += 1
            progress.bytesDone += item.version.size
        case .kept(let why):
            progress.kept += 1
            problems.append(.init(kind: "kept", path: item.displayPath, message: "\(item.displayPath): \(why)"))
        case .failed(let why):
            progress.failed += 1
            problems.append(.init(kind: "failed", path: item.displayPath, message: "\(item.displayPath): \(why)"))
        case .archived:
            progress.failed += 1
            problems.append(.init(kind: "failed", path: item.displayPath,
                                  message: "\(item.displayPath): its object went back to an archive class; run the command again"))
        }
    }
}

/// The files whose objects wait in an archive class, asked after again and again (2 s
/// doubling to 15 minutes) until they can be read: a missing object fails at once; one
/// whose state stays unknown (the bucket cannot be asked) fails after five rounds in a row.
package struct ArchiveWait: Sendable {
    private(set) var waiting: [RestoreItem]
    private var unknownRounds = 0
    private var poll = Backoff(base: 2, cap: 900, jitter: .none)

    package init(_ waiting: [RestoreItem]) {
        self.waiting = waiting
    }

    package var md5s: Set<String> { Set(waiting.map(\.version.md5.hex)) }

    /// Seconds until the next round.
    package mutating func nextWait() -> Double {
        poll.fail(random: 0)
    }

    /// A round's answer: the files that can be read now, and those given up with why.
    package mutating func answered(_ statuses: [String: ObjectStatus]) -> (ready: [RestoreItem], gaveUp: [(item: RestoreItem, why: String)]) {
        func state(_ item: RestoreItem) -> ObjectStatus? { statuses[item.version.md5.hex] }
        let unknown = waiting.filter { state($0)?.state == .unknown }
        unknownRounds = unknown.isEmpty ? 0 : unknownRounds + 1
        let missing = waiting.filter { state($0)?.state == .missing || state($0) == nil }
        let ready = waiting.filter { state($0)?.state == .ready }
        var gaveUp = missing
        if unknownRounds >= 5 { gaveUp += unknown }
        waiting = waiting.filter { w in !ready.contains(w) && !gaveUp.contains(w) }
        if !ready.isEmpty { poll.reset() }
        return (ready, gaveUp.map { ($0, state($0)?.message ?? "its object (\($0.version.md5.hex)) is not in the bucket") })
    }
}
