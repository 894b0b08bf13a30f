import Foundation
import GRDB
import Ingest
import PhotolalaCore
import Queue
import Testing
import Upload
@testable import Manifest

@Suite struct ManifestMirrorTests {
    let db: QueueDatabase
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    init() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("queue-manifest-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        db = try QueueDatabase.open(path: dir.appendingPathComponent("queue.db").path)
        try await db.resetManifest(ManifestLedger(userId: "U", deviceId: "d", writer: "w"))
    }

    func id(_ inode: UInt64, size: Int64 = 100) -> FileIdentity {
        FileIdentity(device: 1, inode: inode, size: size, mtimeSec: 1, mtimeNsec: 2)
    }

    func uploaded(_ path: String, _ inode: UInt64, md5: String, size: Int64 = 100) async throws {
        try await db.observe([ObservedFile(path: path, identity: id(inode, size: size))], now: t0)
        _ = try await db.recordHash(path: path, identity: id(inode, size: size), md5: md5, now: t0)
        while let job = try await db.claimObject(now: t0) { try await db.markUploaded(md5: job.md5, now: t0) }
    }

    func changedPaths() async throws -> [String] {
        try await db.manifestCandidates(limit: 100)?.candidates.map(\.path) ?? []
    }

    func record(_ kind: Int, _ path: String, size: Int64? = 100) -> ManifestRecord {
        ManifestRecord(kind: kind, path: path, folder: "/p", time: 1, size: kind == 3 ? nil : size, md5: kind == 3 ? nil : "aa",
                       mtimeSec: kind == 3 ? nil : 1, mtimeNsec: kind == 3 ? nil : 2)
    }

    @Test func onlyBackedUpFilesBecomeChanges() async throws {
        try await db.observe([ObservedFile(path: "/p/a.jpg", identity: id(1))], now: t0)
        #expect(try await changedPaths().isEmpty)
        _ = try await db.recordHash(path: "/p/a.jpg", identity: id(1), md5: "aa", now: t0)
        #expect(try await changedPaths().isEmpty)
        let job = try #require(try await db.claimObject(now: t0))
        #expect(try await changedPaths().isEmpty)
        try await db.markUploaded(md5: job.md5, now: t0)
        let batch = try #require(try await db.manifestCandidates(limit: 100))
        #expect(batch.candidates.map(\.path) == ["/p/a.jpg"])
        #expect(batch.candidates[0].file?.state == .uploaded && batch.candidates[0].file?.md5 == "aa" && batch.candidates[0].current == nil)
    }

    @Test func goneAndMovedFilesBecomeChanges() async throws {
        try await uploaded("/p/a.jpg", 1, md5: "aa")
        try await uploaded("/p/d/b.jpg", 2, md5: "bb")
        let first = try #require(try await db.manifestCandidates(limit: 100))
        try await db.dropManifestChanges(through: first.through)
        try await db.markGone(path: "/p/a.jpg", now: t0)
        #expect(try await changedPaths() == ["/p/a.jpg"])
        #expect(try await db.manifestCandidates(limit: 100)?.candidates.first?.file?.state == .gone)
        try await db.renameDirectory(from: "/p/d", to: "/p/e", now: t0)
        #expect(await Set(try changedPaths()) == ["/p/a.jpg", "/p/d/b.jpg", "/p/e/b.jpg"])
        let moved = try #require(try await db.manifestCandidates(limit: 100)?.candidates.first { $0.path == "/p/d/b.jpg" })
        #expect(moved.file == nil)
    }

    @Test func aSegmentConsumesItsChangesAndMovesTheTotals() async throws {
        try await uploaded("/p/a.jpg", 1, md5: "aa")
        try await uploaded("/p/b.jpg", 2, md5: "bb")
        let batch = try #require(try await db.manifestCandidates(limit: 100))
        // A change that comes while the segment is on its way stays for the next one.
        try await db.markGone(path: "/p/b.jpg", now: t0)
        let ledger = try await db.recordManifestSegment(seq: 1, records: [record(1, "/p/a.jpg"), record(1, "/p/b.jpg", size: 50)],
                                                  through: batch.through) { $0.seq = 1 }
        #expect(ledger.seq == 1 && ledger.files == 2 && ledger.bytes == 150)
        #expect(try await db.manifestLedger() == ledger)
        let next = try #require(try await db.manifestCandidates(limit: 100))
        #expect(next.candidates.map(\.path) == ["/p/b.jpg"])
        #expect(next.candidates[0].current?.size == 50 && next.candidates[0].current?.folder == "/p")
        let after = try await db.recordManifestSegment(seq: 2, records: [record(3, "/p/b.jpg"), record(2, "/p/a.jpg", size: 70)],
                                                 through: next.through) { $0.seq = 2 }
        #expect(after.files == 1 && after.bytes == 70)
        #expect(try await db.manifestCandidates(limit: 100) == nil)
    }

    @Test func aSnapshotReadsEachFileHistoryInOrder() async throws {
        _ = try await db.recordManifestSegment(seq: 1, records: [record(1, "/p/b.jpg"), record(1, "/p/a.jpg")], through: nil) { _ in }
        _ = try await db.recordManifestSegment(seq: 2, records: [record(3, "/p/b.jpg"), record(2, "/p/a.jpg")], through: nil) { _ in }
        let all = try await db.manifestRecords(after: nil, limit: 100)
        #expect(all.map { "\($0.record.path)@\($0.seq):\($0.record.kind)" } == ["/p/a.jpg@1:1", "/p/a.jpg@2:2", "/p/b.jpg@1:1", "/p/b.jpg@2:3"])
        let page1 = try await db.manifestRecords(after: nil, limit: 3)
        let last = try #require(page1.last)
        let page2 = try await db.manifestRecords(after: (last.record.path, last.seq, last.ord), limit: 3)
        #expect((page1 + page2).map(\.record) == all.map(\.record))
    }

    @Test func startingOverMakesEveryBackedUpFileAChange() async throws {
        try await uploaded("/p/a.jpg", 1, md5: "aa")
        let batch = try #require(try await db.manifestCandidates(limit: 100))
        _ = try await db.recordManifestSegment(seq: 1, records: [record(1, "/p/a.jpg")], through: batch.through) { $0.seq = 1 }
        try await db.resetManifest(ManifestLedger(userId: "V", deviceId: "d", writer: "w"))
        #expect(try await changedPaths() == ["/p/a.jpg"])
        #expect(try await db.manifestRecords(after: nil, limit: 10).isEmpty)
        #expect(try await db.manifestLedger()?.userId == "V")
    }

    @Test func startingOverListsTheFilesInPathOrderWhateverTheirSizes() async throws {
        // Sizes against the paths' order, and twins whose bytes differ (NFC, NFD): the
        // (state, size) index would hand them over smallest first.
        let paths = ["/p/2024/b.jpg", "/p/2024/a.jpg", "/p/2023/z.jpg", "/p/Cafe\u{301}/x.jpg", "/p/Caf\u{E9}/x.jpg", "/p/2024/sub/c.jpg"]
        for (i, path) in paths.enumerated() {
            try await uploaded(path, UInt64(i + 1), md5: String(repeating: "\(i)", count: 32), size: Int64(1_000 - i * 100))
        }
        try await db.resetManifest(ManifestLedger(userId: "V", deviceId: "d", writer: "w"))
        let byBytes = paths.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        // Compared as bytes: `String ==` takes the twins for one name.
        #expect(try await changedPaths().map { Array($0.utf8) } == byBytes.map { Array($0.utf8) })
        // Smallest first, what the index gives, is another order: the test can fail.
        #expect(Array(paths.reversed()).map { Array($0.utf8) } != byBytes.map { Array($0.utf8) })
        // From the path index as it is, not sorted in a temporary tree.
        let plan = try await db.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN \(QueueDatabase.uploadedPathsInOrder)").map { $0["detail"] as String }
        }
        #expect(!plan.isEmpty && !plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
    }

    @Test func changeRowsAreCountedUpToALimit() async throws {
        #expect(try await db.manifestChangeCount(upTo: 10) == 0)
        for i in 1...4 { try await uploaded("/p/\(i).jpg", UInt64(i), md5: String(repeating: "\(i)", count: 32)) }
        let rows = try await db.manifestCandidates(limit: 100)!.candidates.count
        #expect(rows == 4)
        #expect(try await db.manifestChangeCount(upTo: 100) >= rows)
        #expect(try await db.manifestChangeCount(upTo: 2) == 2)
    }

    @Test func uploadsInFlightAreSeen() async throws {
        #expect(try await !db.hasUploadsInFlight())
        try await db.observe([ObservedFile(path: "/p/a.jpg", identity: id(1))], now: t0)
        #expect(try await db.hasUploadsInFlight())
    }
}
