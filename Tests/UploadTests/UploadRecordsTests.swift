import Foundation
import GRDB
import Ingest
import PhotolalaCore
import Queue
import Testing
import Upload

@Suite struct UploadRecordsTests {
    let db: QueueDatabase
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    init() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("queue-upload-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        db = try QueueDatabase.open(path: dir.appendingPathComponent("queue.db").path)
    }

    func id(_ inode: UInt64, size: Int64 = 100, mtime: Int64 = 1) -> FileIdentity {
        FileIdentity(device: 1, inode: inode, size: size, mtimeSec: mtime, mtimeNsec: 0)
    }

    func queued(_ path: String, _ identity: FileIdentity, md5: String) async throws {
        try await db.observe([ObservedFile(path: path, identity: identity)], now: t0)
        #expect(try await db.recordHash(path: path, identity: identity, md5: md5, now: t0) == .recorded(.queued))
    }

    func fileRow(_ path: String) throws -> (state: String, md5: String?) {
        try db.pool.read { db in
            let row = try #require(try Row.fetchOne(db, sql: "SELECT state, md5 FROM file WHERE path = ?", arguments: [path]))
            return (row["state"], row["md5"])
        }
    }

    @Test func anObjectIsClaimedOnceWithALiveFile() async throws {
        try await queued("/p/a.jpg", id(1), md5: "aa")
        try await queued("/p/copy.jpg", id(2), md5: "aa")
        let job = try #require(try await db.claimObject(now: t0))
        #expect(job.md5 == "aa" && job.size == 100)
        #expect(["/p/a.jpg", "/p/copy.jpg"].contains(job.path))
        #expect(try await db.claimObject(now: t0) == nil)
        try await db.markUploaded(md5: "aa", now: t0)
        #expect(try fileRow("/p/a.jpg").state == "uploaded" && fileRow("/p/copy.jpg").state == "uploaded")
    }

    @Test func aChangeFoundAtUploadKeepsANewerHashEventsAlreadyRecorded() async throws {
        try await queued("/p/a.jpg", id(1), md5: "old")
        let job = try #require(try await db.claimObject(now: t0))
        // While it uploads, the file is rewritten; events have the new bytes hashed.
        let newer = id(1, size: 50, mtime: 2)
        #expect(try await db.observe([ObservedFile(path: "/p/a.jpg", identity: newer)], now: t0) == ["/p/a.jpg"])
        #expect(try await db.recordHash(path: "/p/a.jpg", identity: newer, md5: "new", now: t0) == .recorded(.queued))
        // Then the old upload notices the change: the newer hash stays.
        try await db.sourceChanged(job: job, gone: false, now: t0)
        #expect(try fileRow("/p/a.jpg") == ("queued", "new"))
        #expect(try await db.claimObject(now: t0)?.md5 == "new")
    }

    @Test func aChangeFoundAtUploadSendsTheFileBackToBeRead() async throws {
        try await queued("/p/a.jpg", id(1), md5: "old")
        let job = try #require(try await db.claimObject(now: t0))
        try await db.sourceChanged(job: job, gone: false, now: t0)
        #expect(try fileRow("/p/a.jpg") == ("pending", nil))
        try await queued("/p/b.jpg", id(2), md5: "b")
        let gone = try #require(try await db.claimObject(now: t0))
        try await db.sourceChanged(job: gone, gone: true, now: t0)
        #expect(try fileRow("/p/b.jpg").state == "gone")
    }

    @Test func anObjectPutOffForWantOfAFileIsDueWhenOneHoldsItsBytesAgain() async throws {
        try await queued("/p/a.jpg", id(1), md5: "bytes")
        // The file changes and is sent back to be read: no file holds "bytes" for now.
        let job = try #require(try await db.claimObject(now: t0))
        try await db.sourceChanged(job: job, gone: false, now: t0)
        #expect(try await db.claimObject(now: t0) == nil)
        #expect(try await db.nextDueTime(now: t0) == t0.addingTimeInterval(3600))
        // Read again, it holds the same bytes after all: the object is due at once.
        #expect(try await db.recordHash(path: "/p/a.jpg", identity: id(1), md5: "bytes", now: t0) == .recorded(.queued))
        #expect(try await db.hasDueObjects(now: t0))
        #expect(try await db.claimObject(now: t0)?.path == "/p/a.jpg")
    }

    @Test func anObjectPutOffIsDueWhenARenamedTwinAdoptsItsHash() async throws {
        try await queued("/p/a.jpg", id(7), md5: "bytes")
        let job = try #require(try await db.claimObject(now: t0))
        try await db.sourceChanged(job: job, gone: true, now: t0)
        #expect(try await db.claimObject(now: t0) == nil)
        // The same inode turns up under a new name (moved while not watched): it adopts the hash.
        #expect(try await db.observe([ObservedFile(path: "/p/moved.jpg", identity: id(7))], now: t0) == [])
        #expect(try await db.claimObject(now: t0)?.path == "/p/moved.jpg")
    }
}
