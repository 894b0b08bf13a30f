import Foundation
import Glibc
import PhotolalaCore
import Queue
import Testing
import Daemon

/// Issue 25 ("disks left asleep"): the pages a stage wrote reach queue.db a moment after
/// writing stops, not at some later checkpoint that would wake the disk again.
@Suite struct WALCheckpointerTests {
    func modified(_ path: String) -> timespec {
        var st = stat()
        _ = stat(path, &st)
        return st.st_mtim
    }

    @Test func theWALIsCopiedOnceWritingStops() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("wal-checkpoint-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.path + "/queue.db"
        let database = try QueueDatabase.open(path: path)
        await database.checkpoint()
        let before = modified(path)
        #expect(database.lastChange == nil, "opening changed no row")

        try await Task.sleep(for: .milliseconds(20))
        try await database.setSetting("test.key", "a value")
        let changedAt = try #require(database.lastChange)
        #expect(modified(path) == before, "a commit goes to the WAL only")
        // The same value again changes no row.
        try await database.setSetting("test.key", "a value")
        #expect(database.lastChange == changedAt)

        let checkpointer = WALCheckpointer(database: database, quiet: 0.2)
        let running = Task { try? await checkpointer.run() }
        defer { running.cancel() }
        let deadline = Date().addingTimeInterval(10)
        while modified(path) == before && Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(modified(path) != before, "queue.db brought up to date")
        #expect(Date().timeIntervalSince(changedAt) >= 0.2, "not before writing stopped for `quiet`")
    }
}

extension timespec: @retroactive Equatable {
    public static func == (a: timespec, b: timespec) -> Bool { a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec }
}
