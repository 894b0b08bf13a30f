import Foundation
import PhotolalaCore
import Synchronization
import Testing
import Vault
import ManifestFormat

/// Freshness without memory (privacy.md "No side doors", issue 31 item 3): a fresh NAS that
/// never saw a device still catches an older record put back (its sealed write time against
/// the object's `LastModified`) and a cut log (below what another device's record vouches
/// for); a bucket copied whole (every time moved alike) asks rather than refuses; and a
/// device with any format-2 trace is sealed for good (item 1).
@Suite struct ManifestFreshnessTests {
    let account = AccountKey.generate()
    var key: MetadataKey { account.metadataKey }
    let layout = ManifestKeys(userId: "U", deviceId: "dev-1")
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func file(_ path: String, time: Int64) -> ManifestEntry {
        ManifestEntry(kind: .appeared, folder: "/srv/photos", path: Array(path.utf8), time: time,
                      version: FileVersion(size: 10, md5: MD5Value(hex: "0123456789abcdef0123456789abcdef")!, mtimeSec: 1, mtimeNsec: 0))
    }

    /// A device's objects as its NAS writes them, each stored at the time it was written.
    struct Device {
        let bucket = TimedObjects()
        let layout: ManifestKeys
        let account: AccountKey
        var head = ManifestHeader.noPrevious
        var seq: Int64 = 0
        var counter: Int64 = 0
        var records: [Int64: [UInt8]] = [:]

        mutating func log(_ entries: [ManifestEntry], at: Date) {
            seq += 1
            var h = ManifestHeader(kind: .log, device: layout.deviceId, seq: seq, createdAt: Timestamp.string(at), prev: head)
            h.entries = entries.count
            let sealed = ManifestSegment(header: h, entries: entries).sealed(key: account.metadataKey, objectKey: layout.log(seq))
            bucket.put(layout.log(seq), sealed, at: at)
            head = ManifestSegment.sealedDigestHex(of: sealed)
        }

        mutating func record(at: Date, seen: [String: SeenHead]? = nil) {
            counter += 1
            let r = DeviceRecord(deviceId: layout.deviceId, name: "nas", folders: ["/srv/photos"], lastBackupAt: nil, files: 0, bytes: 0,
                                 logSeq: seq, snapshotSeq: 0, updatedAt: Timestamp.string(at), software: "t", counter: counter,
                                 head: ManifestHead(seq: seq, sha256: head), seen: seen)
            let sealed = r.sealed(key: account, wrap: nil, userId: layout.userId, objectKey: layout.record)
            records[counter] = sealed
            bucket.put(layout.record, sealed, at: at)
        }

        func read(_ freshness: ManifestReader.Freshness = .init()) async throws -> ManifestReader.Report {
            try await ManifestReader(store: bucket, keys: layout, key: account.metadataKey, remembered: nil, freshness: freshness).read { _, _ in }
        }
    }

    func device() -> Device { Device(layout: layout, account: account) }

    @Test func aRecordWrittenAndStoredAtTheSameTimeIsFresh() async throws {
        var d = device()
        d.log([file("a.jpg", time: 100)], at: Self.t0)
        d.record(at: Self.t0.addingTimeInterval(1))
        let report = try await d.read()
        #expect(report.complete && !report.replayed && !report.copied && report.problems.isEmpty)
    }

    @Test func anOlderRecordPutBackWithTheNewestSegmentsDeletedIsCaughtByAFreshNAS() async throws {
        var d = device()
        d.log([file("a.jpg", time: 100)], at: Self.t0)
        d.record(at: Self.t0)
        let old = d.records[1]!
        d.log([file("b.jpg", time: 5_000_000)], at: Self.t0.addingTimeInterval(3600))
        d.record(at: Self.t0.addingTimeInterval(3600))
        // A day later: segment 2 deleted, record 1 put back (a new PUT of old bytes).
        d.bucket.remove(layout.log(2))
        d.bucket.put(layout.record, old, at: Self.t0.addingTimeInterval(86_400))
        let report = try await d.read()
        #expect(!report.complete && report.replayed && !report.copied)
        #expect(report.problems.contains { $0.contains("device dev-1") && $0.contains("an older record was put back") })
        // Whole before the record's time: --as-of before it restores.
        #expect(report.wholeBefore == Int64(Self.t0.timeIntervalSince1970 * 1000) || report.wholeBefore == 100)
    }

    @Test func aBucketCopiedWholeAsksInsteadOfRefusing() async throws {
        var d = device()
        d.log([file("a.jpg", time: 100)], at: Self.t0)
        d.record(at: Self.t0)
        // Every object stored again a month later, as a copy of the whole bucket does.
        d.bucket.moveAll(by: 30 * 86_400)
        let asked = try await d.read()
        #expect(asked.copied && !asked.replayed && !asked.complete)
        #expect(asked.problems.contains { $0.contains("copied whole") && $0.contains("--as-of") })
        let confirmed = try await d.read(.init(acceptCopied: true))
        #expect(confirmed.copied && confirmed.complete && confirmed.problems.isEmpty)
    }

    @Test func belowWhatAnotherDeviceVouchesForIsACutLog() async throws {
        var d = device()
        d.log([file("a.jpg", time: 100)], at: Self.t0)
        d.record(at: Self.t0)
        d.log([file("b.jpg", time: 200)], at: Self.t0.addingTimeInterval(60))
        d.record(at: Self.t0.addingTimeInterval(60))
        // Another NAS's record saw dev-1 up to segment 3, record 3: the bucket holds less.
        let vouches = ManifestVouches(records: ["dev-2": DeviceRecord(
            deviceId: "dev-2", name: "other", folders: [], lastBackupAt: nil, files: 0, bytes: 0, logSeq: 1, snapshotSeq: 0, updatedAt: "x",
            software: "t", counter: 1, head: ManifestHead(seq: 1, sha256: ManifestHeader.noPrevious), seen: ["dev-1": SeenHead(counter: 3, seq: 3)])])
        let floor = try #require(vouches.floor(for: "dev-1"))
        #expect(floor.by == "dev-2" && floor.head == SeenHead(counter: 3, seq: 3))
        let report = try await d.read(.init(floor: floor.head, floorBy: floor.by))
        #expect(!report.complete && report.belowFloor)
        #expect(report.problems.contains { $0.contains("device dev-2 saw the manifest of device dev-1 up to segment 3") })
        // At or above the floor: whole.
        let fine = try await d.read(.init(floor: SeenHead(counter: 2, seq: 2), floorBy: "dev-2"))
        #expect(fine.complete && !fine.belowFloor)
    }

    @Test func aDeviceWithAnyFormat2TraceIsSealedForGood() {
        let vouches = ManifestVouches(records: ["dev-2": DeviceRecord(
            deviceId: "dev-2", name: "other", folders: [], lastBackupAt: nil, files: 0, bytes: 0, logSeq: 1, snapshotSeq: 0, updatedAt: "x",
            software: "t", counter: 1, head: ManifestHead(seq: 1, sha256: ManifestHeader.noPrevious), seen: ["dev-1": SeenHead(counter: 3, seq: 3)])])
        let none = ManifestVouches(records: [:])
        let sealed = [layout.prefix + "device.json", layout.log(1)]
        let plaintext = [layout.prefix + "device.json", layout.plaintext.log(1)]
        #expect(none.formatTwoTrace(of: "dev-1", listing: sealed, remembered: nil, userId: "U") != nil)
        #expect(none.formatTwoTrace(of: "dev-1", listing: plaintext, remembered: nil, userId: "U") == nil)
        #expect(none.formatTwoTrace(of: "dev-1", listing: plaintext, remembered: RememberedHead(counter: 1, head: .init(seq: 1, sha256: "x")),
                                    userId: "U") != nil)
        #expect(vouches.formatTwoTrace(of: "dev-1", listing: plaintext, remembered: nil, userId: "U")?.contains("dev-2") == true)
        // A device's own mention of itself is no trace of anything.
        #expect(vouches.formatTwoTrace(of: "dev-2", listing: [], remembered: nil, userId: "U") == nil)
    }
}

/// Objects with the time each was stored, listed as S3 lists them.
final class TimedObjects: ManifestObjects, Sendable {
    private let store = Mutex<[String: (bytes: [UInt8], at: Date)]>([:])

    func put(_ key: String, _ bytes: [UInt8], at: Date) { store.withLock { $0[key] = (bytes, at) } }
    func remove(_ key: String) { _ = store.withLock { $0.removeValue(forKey: key) } }
    func moveAll(by seconds: TimeInterval) {
        store.withLock { s in for (k, v) in s { s[k] = (v.bytes, v.at.addingTimeInterval(seconds)) } }
    }

    func keys(under prefix: String, from token: String?) async throws -> (keys: [String], next: String?) {
        (store.withLock { $0.keys.filter { $0.hasPrefix(prefix) }.sorted() }, nil)
    }

    func listing(under prefix: String, from token: String?) async throws -> (objects: [ListedObject], next: String?) {
        let objects = store.withLock { s in
            s.filter { $0.key.hasPrefix(prefix) }.sorted { $0.key < $1.key }
                .map { ListedObject(key: $0.key, size: Int64($0.value.bytes.count), etag: "", lastModified: $0.value.at) }
        }
        return (objects, nil)
    }

    func bytes(_ key: String) async throws -> [UInt8]? { store.withLock { $0[key]?.bytes } }
}
