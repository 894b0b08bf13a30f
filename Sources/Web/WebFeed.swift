import Control
import Foundation
import PhotolalaCore
import Queue
import Synchronization

/// The one status the page's readers share, so a flood of requests costs the daemon at
/// most one status a second (the control socket and the stages never wait behind the
/// page), and the server-sent events: while at least one page listens, the status is
/// looked at once a second and sent when it changed; with no page open nothing runs.
/// The chart and the folder tallies are cached until the queue database changes, and
/// read again at most every `slowReadInterval` while it keeps changing.
package actor WebFeed {
    package struct Snapshot: Sendable {
        package var status: DaemonStatus
        package var full: [UInt8]
        package var publicJSON: [UInt8]
        package var at: ContinuousClock.Instant
        package var generation: Int
    }

    private let backend: any WebBackend
    private var cached: Snapshot?
    private var computing: Task<Snapshot, Never>?
    /// Behind a lock, not the actor: a reader that goes away leaves at once, from its
    /// stream's termination handler, without a task to reach the actor.
    private nonisolated let subscribers = Readers()
    private var nextSubscriber = 0
    private var pump: Task<Void, Never>?
    private var history: SlowRead<[HistoryMonth]>
    private var folders: SlowRead<FolderReport>
    let slowReadInterval: Duration
    let minimumInterval: Duration

    package struct FolderReport: Codable, Sendable, Equatable {
        package var folders: [FolderTally]
        package var failures: [FailureRow]
    }

    /// A read that is slow with a million photos: its last answer, and when the database
    /// had last changed then.
    struct SlowRead<Value: Sendable>: Sendable {
        var value: Value?
        var changeSeen: Date?
        var readAt: ContinuousClock.Instant?
        var session: Bool = false
        /// How long the read took: a slow one is repeated less often (20 times its own
        /// duration at least), so it never takes more than a twentieth of a core.
        var took: Duration = .zero
    }

    package init(backend: any WebBackend, minimumInterval: Duration = .seconds(1), slowReadInterval: Duration = .seconds(30)) {
        self.backend = backend
        self.minimumInterval = minimumInterval
        self.slowReadInterval = slowReadInterval
        history = SlowRead()
        folders = SlowRead()
    }

    /// The status, at most `minimumInterval` old (or newer when a part changed it).
    package func snapshot() async -> Snapshot {
        if let cached, cached.generation == backend.statusGeneration {
            let age = ContinuousClock.now - cached.at
            // Rates and times move without a part saying so while work goes on; an idle
            // status is only looked at again when something changes (or every 30 s: an
            // attention threshold is a matter of time).
            if age < minimumInterval || (!Self.busy(cached.status) && age < .seconds(30)) { return cached }
        }
        if let computing { return await computing.value }
        let backend = self.backend
        let task = Task<Snapshot, Never> {
            let generation = backend.statusGeneration
            let status = await backend.status()
            let full = (try? ControlJSON.encode(status)) ?? Array("{}".utf8)
            let publicJSON = PublicView.scrubbed((try? ControlJSON.encode(PublicView.status(status))) ?? Array("{}".utf8))
            return Snapshot(status: status, full: full, publicJSON: publicJSON, at: .now, generation: generation)
        }
        computing = task
        let snapshot = await task.value
        computing = nil
        cached = snapshot
        return snapshot
    }

    /// Whether the status has moving numbers (rates, an ETA, files being read).
    static func busy(_ s: DaemonStatus) -> Bool {
        s.queue.hashing > 0 || s.queue.uploading > 0 || s.queue.uploadRate > 0 || s.queue.hashRate > 0 || s.restore != nil
            || s.inventory.state == .listing || s.verify.running || s.watch.scanning
    }

    package func history() async -> [HistoryMonth] {
        let userId = await snapshot().status.account.userId
        let database = backend.database
        if let value = history.value, !due(history, database) { return value }
        let changeSeen = database.lastChange
        let started = ContinuousClock.now
        let months = (try? await database.history(userId: userId)) ?? []
        history = SlowRead(value: months, changeSeen: changeSeen, readAt: .now, took: .now - started)
        return months
    }

    package func folderReport(named: Bool) async -> FolderReport {
        let database = backend.database
        if let value = folders.value, folders.session == named, !due(folders, database) { return value }
        let list = await backend.watchedFolders()
        let changeSeen = database.lastChange
        let started = ContinuousClock.now
        let report = FolderReport(folders: (try? await database.folderTallies(list)) ?? [],
                                  failures: (try? await database.failures(named: named)) ?? [])
        folders = SlowRead(value: report, changeSeen: changeSeen, readAt: .now, session: named, took: .now - started)
        return report
    }

    private func due<V>(_ read: SlowRead<V>, _ database: QueueDatabase) -> Bool {
        guard read.changeSeen != database.lastChange else { return false }
        guard let at = read.readAt else { return true }
        return ContinuousClock.now - at >= max(slowReadInterval, read.took * 20)
    }

    // MARK: - Server-sent events

    /// The statuses to send to one page: the current one first, then each change (at most
    /// one a second). Ends when the subscriber's task is cancelled.
    package func subscribe() -> (Int, AsyncStream<Snapshot>) {
        let id = nextSubscriber
        nextSubscriber += 1
        let (stream, continuation) = AsyncStream<Snapshot>.makeStream(bufferingPolicy: .bufferingNewest(1))
        subscribers.all.withLock { $0[id] = continuation }
        // The pump sees the reader gone at its next look and stops with the last one.
        continuation.onTermination = { [subscribers] _ in
            _ = subscribers.all.withLock { $0.removeValue(forKey: id) }
        }
        // The status the others have, at once (the pump sends only what changed since).
        if let cached { continuation.yield(cached) }
        if pump == nil {
            pump = Task { await self.run() }
        }
        return (id, stream)
    }

    package func unsubscribe(_ id: Int) {
        subscribers.all.withLock { $0.removeValue(forKey: id) }?.finish()
        if subscribers.all.withLock({ $0.isEmpty }) {
            pump?.cancel()
            pump = nil
        }
    }

    package var listeners: Int { subscribers.all.withLock { $0.count } }

    private func run() async {
        var sent: [UInt8]?
        while !Task.isCancelled && !subscribers.all.withLock({ $0.isEmpty }) {
            let snapshot = await snapshot()
            if snapshot.full != sent {
                sent = snapshot.full
                for continuation in subscribers.all.withLock({ Array($0.values) }) { continuation.yield(snapshot) }
            }
            try? await Task.sleep(for: minimumInterval)
        }
        // Left because the last reader went (a cancelled pump was already replaced).
        if !Task.isCancelled { pump = nil }
    }
}

/// The event streams' continuations, by reader.
private final class Readers: Sendable {
    let all = Mutex<[Int: AsyncStream<WebFeed.Snapshot>.Continuation]>([:])
}
