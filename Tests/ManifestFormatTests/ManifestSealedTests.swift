import Digests
import Foundation
import Synchronization
import Testing
import Vault
import ManifestFormat

/// Format 2: sealed segments with owners, SHA-256s and folder records; the chain; the
/// reader's freshness checks (a flipped byte, a copied object, a rolled-back head).
@Suite struct ManifestSealedTests {
    let account = AccountKey.generate()
    var key: MetadataKey { account.metadataKey }
    let layout = ManifestKeys(userId: "U", deviceId: "dev-1")
    static let md5 = MD5Value(hex: "0123456789abcdef0123456789abcdef")!
    static let sha = SHA256Value(bytes: (0..<32).map { UInt8($0 * 7) })!
    static let alice = Ownership(uid: 1000, gid: 100, user: "alice", group: "users", mode: 0o640)
    static let bob = Ownership(uid: 1001, gid: 1001, user: "bob", group: "bob", mode: 0o600)

    func file(_ path: String, _ kind: ManifestEntry.Kind = .appeared, time: Int64 = 1_800_000_000_000, owner: Ownership? = alice,
              sha: SHA256Value? = sha) -> ManifestEntry {
        ManifestEntry(kind: kind, folder: "/srv/photos", path: Array(path.utf8), time: time,
                      version: kind == .gone ? nil : FileVersion(size: 4_000_000, md5: Self.md5, mtimeSec: 1_700_000_000, mtimeNsec: 9, sha256: sha),
                      owner: kind == .gone ? nil : owner)
    }

    func folder(_ path: String, owner: Ownership) -> ManifestEntry {
        ManifestEntry(kind: .folder, folder: "/srv/photos", path: Array(path.utf8), time: 1_799_999_999_000, version: nil, owner: owner,
                      mtime: FileTime(sec: 1_690_000_000, nsec: 5))
    }

    func header(_ kind: ManifestHeader.Kind = .log, seq: Int64 = 1, prev: String = ManifestHeader.noPrevious) -> ManifestHeader {
        ManifestHeader(kind: kind, device: "dev-1", seq: seq, createdAt: "2026-11-22T07:00:00Z", writer: "w", through: 3, prev: prev)
    }

    @Test func entriesWithOwnersDigestsAndFoldersComeBackExactly() throws {
        let entries = [
            folder("", owner: Ownership(uid: 0, gid: 0, user: "root", group: "root", mode: 0o755)),
            folder("2024", owner: Ownership(uid: 1000, gid: 100, user: "alice", group: "users", mode: 0o2750)),
            file("2024/a.jpg"), file("2024/b.jpg"),                       // the same owner: one flag byte
            file("2024/c.jpg", owner: Self.bob, sha: nil),
            file("2024/d.jpg", owner: nil),                                // backed up before owners were recorded
            file("2024/Café.jpg", owner: Ownership(uid: 5000, gid: 5000, mode: 0o644)),   // ids with no names
            file("2024/a.jpg", .gone, time: 1_800_000_000_100),
        ]
        let objectKey = layout.log(1)
        let sealed = ManifestSegment(header: header(), entries: entries).sealed(key: key, objectKey: objectKey)
        #expect(Array(sealed.prefix(8)) == SealedObject.magic)
        let (back, plaintext) = try ManifestSegment.open(sealed, key: key, objectKey: objectKey)
        #expect(back.entries == entries)
        #expect(back.header.format == 2 && back.header.prev == ManifestHeader.noPrevious && back.header.entries == entries.count)
        #expect(back.header.users == ["root", "alice", "bob"] && back.header.groups == ["root", "users", "bob"])
        #expect(try ManifestSegment.decode(plaintext: plaintext) == back)
        // The plaintext names nothing outside its seal.
        #expect(!Self.bytes(sealed, contain: "alice") && !Self.bytes(sealed, contain: "photos"))
    }

    static func bytes(_ bytes: [UInt8], contain text: String) -> Bool {
        let needle = Array(text.utf8)
        guard bytes.count >= needle.count else { return false }
        return (0...(bytes.count - needle.count)).contains { Array(bytes[$0..<($0 + needle.count)]) == needle }
    }

    @Test func foldersAndNamesInRunsAndInTurnsComeBackExactly() throws {
        let nfc = Ownership(uid: 1000, gid: 100, user: "Jos\u{E9}", group: "users", mode: 0o640)
        let nfd = Ownership(uid: 1000, gid: 100, user: "Jose\u{301}", group: "users", mode: 0o640)
        #expect(nfc == nfd && !nfc.sameBytes(as: nfd) && nfc.sameBytes(as: nfc) && !nfc.sameBytes(as: nil))
        func at(_ folder: String, _ path: String, _ owner: Ownership) -> ManifestEntry {
            var e = file(path, owner: owner)
            e.folder = folder
            return e
        }
        let entries = [
            at("/srv/a", "1.jpg", nfc), at("/srv/a", "2.jpg", nfc), at("/srv/b", "1.jpg", nfd), at("/srv/a", "3.jpg", nfc),
            at("/srv/b", "2.jpg", Self.bob), at("/srv/b", "3.jpg", nfd), at("/srv/a", "4.jpg", Self.alice),
        ]
        let objectKey = layout.log(1)
        let sealed = ManifestSegment(header: header(), entries: entries).sealed(key: key, objectKey: objectKey)
        let back = try ManifestSegment.open(sealed, key: key, objectKey: objectKey).segment
        #expect(back.header.folders == ["/srv/a", "/srv/b"])
        #expect(back.header.users?.map { Array($0.utf8) } == [Array("Jos\u{E9}".utf8), Array("Jose\u{301}".utf8), Array("bob".utf8), Array("alice".utf8)])
        #expect(back.entries.map { $0.owner?.user.map { Array($0.utf8) } } == entries.map { $0.owner?.user.map { Array($0.utf8) } })
        #expect(back.entries.map(\.folder) == entries.map(\.folder))
    }

    @Test func aFlippedByteOrACopiedObjectDoesNotOpen() throws {
        let sealed = ManifestSegment(header: header(), entries: [file("a.jpg")]).sealed(key: key, objectKey: layout.log(1))
        for position in [0, 7, 8, 19, 20, sealed.count / 2, sealed.count - 1] {
            var flipped = sealed
            flipped[position] ^= 0x01
            #expect(throws: ManifestFormatError.self) { try ManifestSegment.open(flipped, key: key, objectKey: layout.log(1)) }
        }
        // Copied to another segment's key, or another device's: the associated data differs.
        #expect(throws: ManifestFormatError.self) { try ManifestSegment.open(sealed, key: key, objectKey: layout.log(2)) }
        let other = ManifestKeys(userId: "U", deviceId: "dev-2")
        #expect(throws: ManifestFormatError.self) { try ManifestSegment.open(sealed, key: key, objectKey: other.log(1)) }
        // Another account's key.
        #expect(throws: ManifestFormatError.self) { try ManifestSegment.open(sealed, key: AccountKey.generate().metadataKey, objectKey: layout.log(1)) }
        // A plaintext segment is not a sealed one.
        let plain = ManifestSegment(header: header(), entries: [file("a.jpg")]).encoded()
        #expect(throws: ManifestFormatError.self) { try ManifestSegment.open(plain, key: key, objectKey: layout.log(1)) }
    }

    @Test func plaintextThatDoesNotParseIsRefused() throws {
        var w = ManifestByteWriter()
        let header = Array(#"{"format":2,"kind":"log","device":"d","seq":1,"entries":1,"folders":["/p"],"createdAt":"x","users":[],"groups":[]}"#.utf8)
        w.u32(UInt32(header.count))
        w.append(header)
        // folder 0, path "a", kind 1, time, size, md5, mtime, then flags naming an owner that is not there.
        w.uvarint(0); w.uvarint(0); w.uvarint(1); w.append([UInt8(ascii: "a")]); w.bytes.append(1); w.svarint(1)
        w.uvarint(1); w.append([UInt8](repeating: 0, count: 16)); w.svarint(1); w.uvarint(0)
        var sameOwnerFirst = w
        sameOwnerFirst.bytes.append(4)        // "the previous owner": there is none
        #expect(throws: ManifestFormatError.badRecord(0)) { try ManifestSegment.decode(plaintext: sameOwnerFirst.bytes) }
        var unknownFlag = w
        unknownFlag.bytes.append(8)
        #expect(throws: ManifestFormatError.badRecord(0)) { try ManifestSegment.decode(plaintext: unknownFlag.bytes) }
        var badName = w
        badName.bytes.append(2)
        for v: UInt64 in [1, 1, 0o644, 1, 0] { badName.uvarint(v) }   // user name 1 of an empty table
        #expect(throws: ManifestFormatError.badRecord(0)) { try ManifestSegment.decode(plaintext: badName.bytes) }
        var fine = w
        fine.bytes.append(0)
        #expect(try ManifestSegment.decode(plaintext: fine.bytes).entries.count == 1)
    }

    @Test func aFormat1EncoderLeavesFolderRecordsOut() throws {
        let bytes = ManifestSegment(header: header(), entries: [folder("x", owner: Self.alice), file("x/a.jpg")]).encoded()
        let back = try ManifestSegment.decode(bytes)
        #expect(back.entries.map(\.kind) == [.appeared] && back.entries[0].owner == nil && back.entries[0].version?.sha256 == nil)
    }

    @Test func sha256ValuesRoundTrip() {
        #expect(SHA256Value(hex: Self.sha.hex) == Self.sha && Self.sha.hex.count == 64)
        #expect(SHA256Value(bytes: Self.sha.bytes) == Self.sha)
        #expect(SHA256Value(hex: "00") == nil && SHA256Value(hex: String(repeating: "g", count: 64)) == nil)
    }

    // MARK: the chain, read back

    /// A device's objects as its NAS writes them: logs chained, then a record naming the head.
    struct Device {
        let bucket = Objects()
        let layout: ManifestKeys
        let key: MetadataKey
        var head = ManifestHeader.noPrevious
        var seq: Int64 = 0
        var counter: Int64 = 0
        var written: [Int64: [UInt8]] = [:]

        mutating func log(_ entries: [ManifestEntry]) {
            seq += 1
            var h = ManifestHeader(kind: .log, device: layout.deviceId, seq: seq, createdAt: "2026-11-22T07:00:00Z", prev: head)
            h.entries = entries.count
            let sealed = ManifestSegment(header: h, entries: entries).sealed(key: key, objectKey: layout.log(seq))
            bucket.put(layout.log(seq), sealed)
            written[seq] = sealed
            head = ManifestSegment.sealedDigestHex(of: sealed)
        }

        mutating func record() {
            counter += 1
            let r = DeviceRecord(deviceId: layout.deviceId, name: "nas", folders: ["/srv/photos"], lastBackupAt: nil, files: 0, bytes: 0,
                                 logSeq: seq, snapshotSeq: 0, updatedAt: "x", software: "t", counter: counter, head: ManifestHead(seq: seq, sha256: head))
            bucket.put(layout.record, r.sealed(key: key, objectKey: layout.record))
        }

        /// A snapshot of everything so far at `seq`, then the logs it covers deleted.
        mutating func compact(_ entries: [ManifestEntry]) {
            var part = ManifestHeader(kind: .snapshot, device: layout.deviceId, seq: seq, part: 1, createdAt: "x", prev: head)
            part.entries = entries.count
            let sealed = ManifestSegment(header: part, entries: entries).sealed(key: key, objectKey: layout.snapshotPart(seq, part: 1))
            bucket.put(layout.snapshotPart(seq, part: 1), sealed)
            var index = ManifestHeader(kind: .snapshotIndex, device: layout.deviceId, seq: seq, createdAt: "x",
                                       parts: [.init(part: 1, sha256: ManifestSegment.sealedDigestHex(of: sealed), entries: entries.count)], prev: head)
            index.entries = entries.count
            bucket.put(layout.snapshotIndex(seq), ManifestSegment(header: index, entries: []).sealed(key: key, objectKey: layout.snapshotIndex(seq)))
            for n in 1...seq { bucket.remove(layout.log(n)) }
        }

        func read(remembered: RememberedHead? = nil) async throws -> (paths: [String], report: ManifestReader.Report) {
            var replay = ManifestReplay(asOf: nil)
            let report = try await ManifestReader(store: bucket, keys: layout, key: key, remembered: remembered).read { segment, plaintext in
                #expect((try? ManifestSegment.decode(plaintext: plaintext)) == segment)
                replay.apply(segment.entries)
            }
            return (replay.files.map { String(decoding: $0.path, as: UTF8.self) }, report)
        }
    }

    func device() -> Device { Device(layout: layout, key: key) }

    @Test func aWholeChainReadsWholeAndNamesItsHead() async throws {
        var d = device()
        d.log([file("a.jpg", time: 100)])
        d.log([file("b.jpg", time: 200)])
        d.record()
        let (paths, report) = try await d.read()
        #expect(paths == ["a.jpg", "b.jpg"])
        #expect(report.complete && report.problems.isEmpty && report.format == 2 && report.wholeBefore == nil)
        #expect(report.head == RememberedHead(counter: 1, head: ManifestHead(seq: 2, sha256: d.head)))
        // Compacted: the snapshot's index names the head, and the next log chains on to it.
        d.compact([file("a.jpg", time: 100), file("b.jpg", time: 200)])
        d.record()
        #expect(try await d.read().report.complete)
        d.log([file("c.jpg", time: 300)])
        d.record()
        let after = try await d.read()
        #expect(after.paths == ["a.jpg", "b.jpg", "c.jpg"] && after.report.complete && after.report.problems.isEmpty)
    }

    @Test func aSegmentReplacedByAnOlderAuthenticCopyBreaksTheChain() async throws {
        var d = device()
        d.log([file("a.jpg", time: 100)])
        d.log([file("b.jpg", time: 200)])
        let original2 = d.written[2]!
        // Segment 2 is written again (another copy, a fork): 3 follows the new one.
        d.seq = 1
        d.head = ManifestSegment.sealedDigestHex(of: d.written[1]!)
        d.log([file("b2.jpg", time: 210)])
        d.log([file("c.jpg", time: 300)])
        d.record()
        #expect(try await d.read().report.complete)
        // The bucket puts the first copy of 2 back: authentic, but 3 does not follow it.
        d.bucket.put(layout.log(2), original2)
        let (paths, report) = try await d.read()
        #expect(paths == ["a.jpg", "b.jpg"])
        #expect(!report.complete && report.problems.contains { $0.contains("does not follow segment 2") })
        #expect(report.wholeBefore == 200)
    }

    @Test func theNewestSegmentsDeletedAreAMissingHead() async throws {
        var d = device()
        for t in [100, 200, 300] as [Int64] { d.log([file("f\(t).jpg", time: t)]) }
        d.record()
        d.bucket.remove(layout.log(3))
        let (paths, report) = try await d.read()
        #expect(paths == ["f100.jpg", "f200.jpg"])
        #expect(!report.complete && report.problems.contains { $0.contains("the device's record names segment 3") })
        // Whole for any time before the last record it holds.
        #expect(report.wholeBefore == 200 && report.head == nil)
    }

    @Test func aRolledBackRecordAndChainAreRefusedAgainstTheRememberedHead() async throws {
        var d = device()
        d.log([file("a.jpg", time: 100)])
        d.record()
        let oldRecord = d.bucket.get(layout.record)!
        let old1 = d.written[1]!
        d.log([file("b.jpg", time: 200)])
        d.record()
        let seen = try #require(try await d.read().report.head)
        #expect(seen.counter == 2 && seen.head.seq == 2)
        // The bucket goes back to how it was after segment 1: all of it authentic.
        d.bucket.put(layout.record, oldRecord)
        d.bucket.remove(layout.log(2))
        d.bucket.put(layout.log(1), old1)
        let fresh = try await d.read()
        #expect(fresh.report.complete, "without a memory, an old state is all a new reader can know")
        let (paths, report) = try await d.read(remembered: seen)
        #expect(paths == ["a.jpg"] && !report.complete)
        #expect(report.problems.contains { $0.contains("rolled back") })
        #expect(report.problems.contains { $0.contains("names segment 2") })
        #expect(report.wholeBefore == 100)
    }

    @Test func aRecordThatDoesNotOpenOrIsMissingProvesNothing() async throws {
        var d = device()
        d.log([file("a.jpg", time: 100)])
        d.record()
        // device.json copied from another device: it does not open under this key.
        let other = ManifestKeys(userId: "U", deviceId: "dev-2")
        let stranger = DeviceRecord(deviceId: "dev-2", name: "x", folders: [], lastBackupAt: nil, files: 0, bytes: 0, logSeq: 9, snapshotSeq: 0,
                                    updatedAt: "x", software: "t", counter: 9, head: ManifestHead(seq: 9, sha256: d.head))
        d.bucket.put(layout.record, stranger.sealed(key: key, objectKey: other.record))
        let copied = try await d.read()
        #expect(!copied.report.complete && copied.report.problems.contains { $0.contains("cannot be trusted") })
        d.bucket.remove(layout.record)
        let missing = try await d.read()
        #expect(missing.paths == ["a.jpg"] && !missing.report.complete && missing.report.wholeBefore == 100)
    }

    @Test func aCopiedSegmentStopsTheReadWithAProblem() async throws {
        var d = device()
        d.log([file("a.jpg", time: 100)])
        var e = Device(layout: ManifestKeys(userId: "U", deviceId: "dev-2"), key: key)
        e.log([file("evil.jpg", time: 150)])
        e.log([file("evil2.jpg", time: 160)])
        // Another device's segment 2, copied under this device's key for segment 2.
        d.bucket.put(layout.log(2), e.written[2]!)
        d.record()
        let (paths, report) = try await d.read()
        #expect(paths == ["a.jpg"] && !report.complete)
        #expect(report.problems.contains { $0.contains(layout.log(2)) && $0.contains("does not authenticate") })
    }
}

/// Objects in memory, as another tool reads a bucket.
final class Objects: ManifestObjects, Sendable {
    private let store = Mutex<[String: [UInt8]]>([:])

    func put(_ key: String, _ bytes: [UInt8]) { store.withLock { $0[key] = bytes } }
    func remove(_ key: String) { _ = store.withLock { $0.removeValue(forKey: key) } }
    func get(_ key: String) -> [UInt8]? { store.withLock { $0[key] } }

    func keys(under prefix: String, from token: String?) async throws -> (keys: [String], next: String?) {
        (store.withLock { $0.keys.filter { $0.hasPrefix(prefix) }.sorted() }, nil)
    }

    func bytes(_ key: String) async throws -> [UInt8]? { get(key) }
}
