import Control
import Foundation
import PhotolalaCore
import Queue
import Synchronization
import Testing
import Web

/// What keeps a flood of the page from reaching the daemon: however many readers, one
/// status at most a second (an idle one only when a part says it changed).
@Suite struct WebFeedTests {
    final class Counting: WebBackend {
        let database: QueueDatabase
        let asked = Mutex(0)
        let generation = Mutex(0)
        let busy: Bool
        init(database: QueueDatabase, busy: Bool) {
            self.database = database
            self.busy = busy
        }
        var statusGeneration: Int { generation.withLock { $0 } }
        func status() async -> DaemonStatus {
            asked.withLock { $0 += 1 }
            var s = DaemonStatus(state: .running)
            if busy { s.queue.uploading = 1 }
            return s
        }
        func watchedFolders() async -> [String] { [] }
        func perform(_ route: ControlRoute, body: [UInt8], as peer: PeerCredentials) async -> ControlResponse { .error(500, "x", "x") }
    }

    static func database() throws -> QueueDatabase {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("web-feed-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return try QueueDatabase.open(path: dir + "/queue.db")
    }

    @Test func aThousandReadersCostOneStatus() async throws {
        let backend = Counting(database: try Self.database(), busy: true)
        let feed = WebFeed(backend: backend, minimumInterval: .seconds(5))
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<1000 { group.addTask { _ = await feed.snapshot() } }
        }
        #expect(backend.asked.withLock { $0 } == 1)
    }

    @Test func anIdleStatusIsAskedAgainOnlyWhenItChanged() async throws {
        let backend = Counting(database: try Self.database(), busy: false)
        let feed = WebFeed(backend: backend, minimumInterval: .milliseconds(10))
        _ = await feed.snapshot()
        try await Task.sleep(for: .milliseconds(50))
        _ = await feed.snapshot()
        #expect(backend.asked.withLock { $0 } == 1)
        backend.generation.withLock { $0 += 1 }
        _ = await feed.snapshot()
        #expect(backend.asked.withLock { $0 } == 2)
    }

    @Test func aBusyStatusIsAskedAgainAfterTheInterval() async throws {
        let backend = Counting(database: try Self.database(), busy: true)
        let feed = WebFeed(backend: backend, minimumInterval: .milliseconds(10))
        _ = await feed.snapshot()
        try await Task.sleep(for: .milliseconds(50))
        _ = await feed.snapshot()
        #expect(backend.asked.withLock { $0 } == 2)
    }

    @Test func eventsStopWhenTheLastReaderLeaves() async throws {
        let backend = Counting(database: try Self.database(), busy: true)
        let feed = WebFeed(backend: backend, minimumInterval: .milliseconds(20))
        let (id, stream) = await feed.subscribe()
        var iterator = stream.makeAsyncIterator()
        _ = await iterator.next()
        #expect(await feed.listeners == 1)
        await feed.unsubscribe(id)
        #expect(await feed.listeners == 0)
        let asked = backend.asked.withLock { $0 }
        try await Task.sleep(for: .milliseconds(200))
        #expect(backend.asked.withLock { $0 } <= asked + 1)
    }
}
