import Dispatch
import Foundation
import PhotolalaCore
import Synchronization
import Testing
import Queue

/// The queue database's reads and writes beside its upkeep.
@Suite struct QueueDatabaseTests {
    let dir: URL
    var path: String { dir.appendingPathComponent("queue.db").path }

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("queue-db-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    /// Ingest gives memory back two seconds after its work runs out, while the other stages
    /// go on reading. GRDB's `releaseMemory` holds its reader list's lock while it waits for
    /// each reader in turn, and a read begun with `asyncRead` gives its reader back on that
    /// reader's own queue, which needs the same lock: a read under way when the release
    /// began hung the release, that read and every later one (issue 30's e2e stalls: a stage
    /// stopped mid-step, nothing logged, the status no longer answered).
    @Test func memoryIsGivenBackWhileAReadIsUnderWay() async throws {
        let db = try QueueDatabase.open(path: path)
        _ = try await db.counts()
        let entered = DispatchSemaphore(value: 0)
        let finished = Finished()
        // Not awaited in the test's structure: hung, it could never be awaited.
        Task {
            async let read: Void = db.read { _ in
                entered.signal()
                // Still reading when the release reaches this reader.
                usleep(300_000)
            }
            await Blocking.run { entered.wait() }
            await db.releaseMemory()
            try? await read
            _ = try? await db.counts()
            finished.done()
        }
        // A hang is for good; a minute tells it from a slow start. Ten seconds were once
        // not enough beside the other suites on two busy cores (a clean-clone CI run; the
        // read and the release wait for libdispatch's threads, which those suites share).
        let deadline = ContinuousClock.now.advanced(by: .seconds(60))
        while !finished.isDone && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(finished.isDone, "releasing memory while a read was under way hung the database")
    }

    /// Status reads the counts many times a second; they are read again only after a
    /// write changed a row, and then at once.
    @Test func countsFollowEveryWriteAndAreNotReadAgainWithoutOne() async throws {
        let db = try QueueDatabase.open(path: path)
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        func insert(_ name: String, inode: UInt64) async throws {
            try await db.write { db in
                _ = try Transitions(db, now: now).insertFile(path: "/p/\(name)", identity: FileIdentity(device: 1, inode: inode, size: 5,
                                                                                                       mtimeSec: 0, mtimeNsec: 0))
            }
        }
        #expect(try await db.counts().pending == 0)
        try await insert("a.jpg", inode: 1)
        #expect(try await db.counts().pending == 1)
        try await insert("b.jpg", inode: 2)
        #expect(try await db.counts() == db.counts())
        #expect(try await db.counts().pending == 2)
        // A write that changes no row (the file is known) leaves the answer as it was.
        try await insert("a.jpg", inode: 1)
        #expect(try await db.counts().pending == 2)
        // A row put in behind the queue's writes is not seen until the next write: the
        // answer was not read again meanwhile.
        try await db.pool.write { db in
            try db.execute(sql: "INSERT INTO file(path, dir, state, updatedAt, size) VALUES ('/p/c.jpg', '/p', 'pending', 0, 5)")
        }
        #expect(try await db.counts().pending == 2)
        try await db.write { db in try Transitions(db, now: now).fileGone(path: "/p/a.jpg") }
        let after = try await db.counts()
        #expect(after.pending == 2)
        #expect(after.pendingBytes == 10)
    }

    private final class Finished: Sendable {
        private let flag = Atomic<Bool>(false)
        func done() { flag.store(true, ordering: .relaxed) }
        var isDone: Bool { flag.load(ordering: .relaxed) }
    }
}
