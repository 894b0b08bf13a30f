import Bucket
import Digests
import Foundation
import GRDB
import Testing
@testable import Catalog
@testable import Queue

/// A directory removed when the value goes away.
final class TempDir: Sendable {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("catalogtests-" + UUID().uuidString).path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

func md5Hex(_ text: String) -> String { Hex.string(MD5.digest(Array(text.utf8))) }

/// A photo of ours as the thumbnail stage leaves it: `seed` makes its MD5s.
func photo(_ seed: String, date: Int64, format: String = "JPEG", size: Int64 = 1000) -> CatalogRow {
    CatalogRow(headMD5: md5Hex("head " + seed), size: size, md5: md5Hex(seed), date: date, format: format)
}

/// Another device's row, as a line.
func theirs(_ seed: String, date: Int64, format: String = "HEIF") -> String {
    "\(md5Hex("their head " + seed)),2000,\(md5Hex("theirs " + seed)),\(date),\(format)"
}

/// A queue database in a temporary state directory, with photo rows put there the way
/// the upload and thumbnail stages leave them.
struct TestQueue {
    let dir: TempDir
    let database: QueueDatabase
    var workspace: CatalogWorkspace { CatalogWorkspace(stateDir: dir.path) }

    init() throws {
        dir = try TempDir()
        database = try QueueDatabase.open(path: dir.path + "/queue.db")
    }

    /// Uploaded objects whose photos are `state` (ready: thumbnail up, columns filled).
    func add(_ rows: [CatalogRow], state: String = "ready") throws {
        try database.pool.write { db in
            for row in rows {
                try db.execute(sql: "INSERT OR IGNORE INTO object(md5, size, state, updatedAt) VALUES (?, ?, 'uploaded', 0)",
                               arguments: [row.md5, row.size])
                try db.execute(sql: """
                    INSERT INTO photo(md5, state, headMD5, size, format, takenAt, updatedAt) VALUES (?, ?, ?, ?, ?, ?, 0)
                    """, arguments: [row.md5, state, row.headMD5, row.size, row.format, row.date])
            }
        }
    }

    func catalogColumn(_ md5: String) throws -> String? {
        try database.pool.read { db in try String.fetchOne(db, sql: "SELECT catalog FROM photo WHERE md5 = ?", arguments: [md5]) }
    }

    func execute(_ sql: String) throws {
        try database.pool.write { db in try db.execute(sql: sql) }
    }
}

/// A bucket in memory, for the publishing logic's unit tests (the real S3 is in
/// `CatalogStackTests`). ETags are the bodies' MD5s, as S3 makes them for a single PUT.
actor MemoryBucket {
    var objects: [String: [UInt8]] = [:]
    /// Like Ceph Pacific: every conditional PUT answers 412, whether or not it holds.
    var refusesConditions = false
    /// Runs before each pointer write: a test's other writer publishes there.
    var beforePointerWrite: (@Sendable () async -> Void)?
    private(set) var pointerWrites: [PointerCondition] = []
    private(set) var heads: [String] = []

    func put(_ key: String, _ body: [UInt8]) { objects[key] = body }
    func put(_ key: String, _ text: String) { objects[key] = Array(text.utf8) }
    func delete(_ key: String) { objects[key] = nil }
    func get(_ key: String) -> [UInt8]? { objects[key] }
    func etag(_ key: String) -> String? { objects[key].map { Hex.string(MD5.digest($0)) } }
    func setRefusesConditions(_ on: Bool) { refusesConditions = on }
    func setBeforePointerWrite(_ hook: (@Sendable () async -> Void)?) { beforePointerWrite = hook }
    func noteHead(_ key: String) { heads.append(key) }

    func writePointer(_ key: String, _ body: [UInt8], _ condition: PointerCondition) async throws(S3Error) -> String {
        if let hook = beforePointerWrite { await hook() }
        pointerWrites.append(condition)
        let refused = S3Error(kind: .preconditionFailed, status: 412, code: "PreconditionFailed", message: "", key: key)
        switch condition {
        case .ifMatch(let expected):
            if refusesConditions || etag(key) != expected { throw refused }
        case .ifNoneMatch:
            if refusesConditions || objects[key] != nil { throw refused }
        case .unconditional:
            break
        }
        objects[key] = body
        return etag(key)!
    }

    /// Publishes a catalog the way the apps do: snapshot, then the pointer, unconditionally.
    func publishAsAnApp(userId: String, lines: [String]) -> String {
        let body = Array(([CatalogFormat.header] + lines).map { $0 + "\n" }.joined().utf8)
        let md5 = Hex.string(MD5.digest(body))
        objects[CatalogFormat.snapshotKey(userId: userId, md5: md5)] = body
        objects[CatalogFormat.pointerKey(userId: userId)] = Array(md5.utf8)
        return md5
    }
}

struct MemoryStore: CatalogStore {
    let bucket: MemoryBucket
    let userId: String

    func readPointer() async throws(S3Error) -> StoredPointer? {
        let key = CatalogFormat.pointerKey(userId: userId)
        guard let body = await bucket.get(key), let etag = await bucket.etag(key) else { return nil }
        return StoredPointer(body: body, etag: etag)
    }

    func downloadSnapshot(md5: String, to path: String) async throws(S3Error) -> String? {
        guard let body = await bucket.get(CatalogFormat.snapshotKey(userId: userId, md5: md5)) else { return nil }
        FileManager.default.createFile(atPath: path, contents: Data(body))
        return Hex.string(MD5.digest(body))
    }

    func uploadSnapshot(path: String, md5: String, size: Int64) async throws(S3Error) {
        let body = [UInt8](FileManager.default.contents(atPath: path) ?? Data())
        #expect(Hex.string(MD5.digest(body)) == md5 && Int64(body.count) == size)
        await bucket.put(CatalogFormat.snapshotKey(userId: userId, md5: md5), body)
    }

    func writePointer(md5: String, condition: PointerCondition) async throws(S3Error) -> String {
        try await bucket.writePointer(CatalogFormat.pointerKey(userId: userId), CatalogFormat.pointerBody(md5: md5), condition)
    }

    func photoExists(md5: String) async throws(S3Error) -> Bool {
        let key = CatalogFormat.photoKey(userId: userId, md5: md5)
        await bucket.noteHead(key)
        return await bucket.get(key) != nil
    }

    func listPhotos(_ page: @Sendable ([String]) throws -> Void) async throws(S3Error) {
        let prefix = CatalogFormat.photoPrefix(userId: userId)
        let md5s = await bucket.objects.keys.filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count).dropLast(4)) }
        do { try page(md5s.sorted()) } catch { throw S3Error(kind: .localFile, code: "X", message: "\(error)") }
    }
}

/// A catalog read back exactly as the apps read it: the pointer, the snapshot it names,
/// whose MD5 must be its name and the pointer's, the exact header, then the rows.
struct AppView: Equatable {
    var md5: String
    var lines: [String]

    /// `get` fetches a key's bytes (nil when absent).
    static func read(userId: String, sourceLocation: SourceLocation = #_sourceLocation,
                     _ get: (String) async throws -> [UInt8]?) async throws -> AppView? {
        guard let pointer = try await get(CatalogFormat.pointerKey(userId: userId)) else { return nil }
        let md5 = String(decoding: pointer, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(CatalogFormat.isLowercaseMD5(md5), "pointer holds \(md5)", sourceLocation: sourceLocation)
        let snapshot = try #require(try await get(CatalogFormat.snapshotKey(userId: userId, md5: md5)),
                                    "the pointer names a snapshot that is not there", sourceLocation: sourceLocation)
        #expect(Hex.string(MD5.digest(snapshot)) == md5, "the snapshot's bytes have another MD5 than its name", sourceLocation: sourceLocation)
        let text = String(decoding: snapshot, as: UTF8.self)
        #expect(text.hasSuffix("\n") && !text.contains("\r") && !text.contains("\n\n"), sourceLocation: sourceLocation)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.removeLast() == "")
        #expect(lines.first == CatalogFormat.header, sourceLocation: sourceLocation)
        return AppView(md5: md5, lines: Array(lines.dropFirst()))
    }

    /// Newest first, undated last.
    var isNewestFirst: Bool {
        let dates = lines.map { CatalogLine.parse($0).date }
        return zip(dates, dates.dropFirst()).allSatisfy { CatalogLine.isNewerOrSame($0, than: $1) }
    }

    var md5s: [String] { lines.compactMap { CatalogLine.parse($0).md5 } }
}

/// The catalog in a memory bucket, read as the apps read it.
func appView(_ bucket: MemoryBucket, _ userId: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> AppView? {
    try await AppView.read(userId: userId, sourceLocation: sourceLocation) { await bucket.get($0) }
}
