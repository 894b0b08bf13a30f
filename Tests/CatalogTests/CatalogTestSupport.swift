import Bucket
import BucketTesting
import Digests
import Foundation
import GRDB
import Logging
import Testing
import Catalog
import Queue

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

/// The user's bucket in memory for the publishing logic's tests (the real S3 is in
/// `CatalogStackTests`): a `BucketTesting.InMemoryBucket` (conditional writes, ETags as S3
/// makes them), reached by the stage's own `BucketCatalogStore` through a `BucketSession`.
struct MemoryBucket: Sendable {
    let userId: String
    let memory = InMemoryBucket()

    var store: BucketCatalogStore {
        BucketCatalogStore(userId: userId,
                           bucket: BucketSession(grants: FixedGrants(userId: userId), transport: memory, logger: Logger(label: "test")),
                           multipartThreshold: 64 << 20, partSize: 16 << 20, journal: { _ in }, logger: Logger(label: "test"))
    }

    private var pointerKey: String { CatalogFormat.pointerKey(userId: userId) }

    func put(_ key: String, _ text: String) { memory.store(key, bytes: Array(text.utf8)) }
    func get(_ key: String) -> [UInt8]? { memory.object(key)?.bytes }
    var objects: [String: [UInt8]] { Dictionary(uniqueKeysWithValues: memory.keys.map { ($0, get($0) ?? []) }) }

    /// Every write of the pointer, refused ones included, by its condition.
    var pointerWrites: [PointerCondition] {
        memory.writes(to: pointerKey).map { condition in
            switch condition {
            case .ifMatch(let etag): .ifMatch(etag)
            case .ifNoneMatch: .ifNoneMatch
            case .none: .unconditional
            }
        }
    }

    /// HEADs of photos (is a photo still there?).
    var photoHeads: Int { memory.requests("HeadObject", under: CatalogFormat.photoPrefix(userId: userId)) }

    /// Like Ceph Pacific: every conditional PUT answers 412, whether or not it holds.
    func refuseConditions() { memory.refuseConditionalWrites(true) }

    /// Runs before each pointer write: a test's other writer publishes there.
    func beforePointerWrite(_ hook: @escaping @Sendable () async -> Void) { memory.beforeWriting(pointerKey, hook) }

    /// Publishes a catalog the way the apps do: snapshot, then the pointer, unconditionally.
    @discardableResult
    func publishAsAnApp(lines: [String]) -> String {
        let body = Array(([CatalogFormat.header] + lines).map { $0 + "\n" }.joined().utf8)
        let md5 = Hex.string(MD5.digest(body))
        memory.store(CatalogFormat.snapshotKey(userId: userId, md5: md5), bytes: body)
        memory.store(pointerKey, bytes: Array(md5.utf8))
        return md5
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
    try await AppView.read(userId: userId, sourceLocation: sourceLocation) { bucket.get($0) }
}
