#if canImport(Glibc)
import Glibc
#endif
import Digests
import Foundation
import Logging
import PhotolalaCore
import Queue
import Testing
import Ingest

/// The ingest stage run in-process: real inotify on a temporary folder, a temporary
/// queue database, the real hasher pool. A photo that was there at start (the first scan)
/// and one written while it runs (an event) both end hashed and queued for upload; one
/// deleted ends gone.
@Suite struct IngestServiceTests {
    let dir: URL
    let photos: String
    let database: QueueDatabase

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ingest-\(UUID().uuidString)")
        photos = dir.appendingPathComponent("photos").path
        try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
        database = try QueueDatabase.open(path: dir.appendingPathComponent("queue.db").path)
    }

    func service() -> IngestService {
        var settings = Settings()
        settings.watch.folders = [photos]
        settings.watch.settle = .milliseconds(200)
        return IngestService(context: StageContext(database: database, logger: Logger(label: "ingest-tests")), options: .init(settings, hashWorkers: 2))
    }

    /// Writes `bytes` the way a copy does (a new file, closed), and answers its MD5.
    @discardableResult
    func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        try Data(bytes).write(to: URL(fileURLWithPath: photos + "/" + name))
        return Hex.string(MD5.digest(bytes))
    }

    func record(_ name: String) async throws -> FileRecord? {
        try await database.files(at: photos + "/" + name, after: nil, limit: 1).first { $0.path == photos + "/" + name }
    }

    /// Polls until `condition` holds (the stage works concurrently), a few seconds at most.
    func eventually(_ what: Comment, _ condition: () async throws -> Bool) async throws {
        for _ in 0..<500 {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("never happened: \(what)")
    }

    @Test func photosFoundByTheScanAndWrittenLaterAreHashedAndQueued() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        let before = try write("before.jpg", (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try write("notes.txt", Array("not a photo".utf8))
        let ingest = service()
        let readyToUpload = database.signals.readyToUpload
        let woken = readyToUpload.generation
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await ingest.run() }

            try await eventually("the first scan hashed before.jpg") { try await record("before.jpg")?.state == .queued }
            #expect(try await record("before.jpg")?.md5 == before)
            #expect(try await record("notes.txt") == nil)
            // The queue wakes the uploader (its signal is sent from a task of its own).
            var rang = false
            for _ in 0..<500 where !rang {
                rang = readyToUpload.generation != woken
                if !rang { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(rang)

            // Written while running: inotify's CLOSE_WRITE, settled, hashed, queued.
            let later = try write("later.jpg", (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            try await eventually("later.jpg was hashed") { try await record("later.jpg")?.state == .queued }
            #expect(try await record("later.jpg")?.md5 == later)

            // The same bytes under another name: no second object, no second read needed.
            try write("copy.jpg", (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            try await eventually("copy.jpg was recorded") { try await record("copy.jpg")?.state == .queued }
            #expect(try await record("copy.jpg")?.md5 == later)

            try FileManager.default.removeItem(atPath: photos + "/before.jpg")
            try await eventually("before.jpg is gone") { try await record("before.jpg")?.state == .gone }

            var status = DaemonStatus()
            await ingest.contribute(to: &status)
            #expect(status.watch.folders == 1 && !status.watch.scanning && status.watch.lastScanAt != nil)
            #expect(status.problems.isEmpty)
            group.cancelAll()
        }
    }
}
