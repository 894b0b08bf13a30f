import Digests
import Foundation
import Testing
import ManifestFormat

@Suite struct ManifestSegmentTests {
    static let md5 = MD5Value(hex: "0123456789abcdef0123456789abcdef")!

    func item(_ path: [UInt8], _ kind: ManifestEntry.Kind = .appeared, folder: String = "/srv/photos", time: Int64 = 1_800_000_000_000,
               size: Int64 = 4_000_000, mtime: (Int64, Int64) = (1_700_000_000, 123_456_789)) -> ManifestEntry {
        ManifestEntry(kind: kind, folder: folder, path: path, time: time,
                      version: kind == .gone ? nil : FileVersion(size: size, md5: Self.md5, mtimeSec: mtime.0, mtimeNsec: mtime.1))
    }

    func header(_ kind: ManifestHeader.Kind = .log, seq: Int64 = 7) -> ManifestHeader {
        ManifestHeader(kind: kind, device: "7d1e4c2a-9b3f-4e55-8c61-2f0a9d8e7b14", seq: seq, createdAt: "2026-11-22T07:00:00Z",
                       writer: "w", through: 42)
    }

    @Test func entriesComeBackByteForByte() throws {
        let nfc = Array("2024/Café.jpg".utf8)
        let nfd = Array("2024/Cafe\u{301}.jpg".utf8)
        let long = Array("deep/" .utf8) + Array(repeating: UInt8(ascii: "x"), count: 251) + Array(".jpg".utf8)
        let notUTF8: [UInt8] = Array("odd/".utf8) + [0xff, 0xfe, 0x41] + Array(".jpg".utf8)
        let entries = [
            item(Array("2024/Summer trip/IMG 0001.jpg".utf8)),
            item(nfc), item(nfd), item(long), item(notUTF8),
            item(Array("a.heic".utf8), .changed, folder: "/home/alice/Pictures", time: 1_800_000_000_500, size: 0, mtime: (-86_400, 999_999_999)),
            item(nfc, .gone, time: 1_799_999_999_000),
        ]
        let bytes = ManifestSegment(header: header(), entries: entries).encoded()
        let back = try ManifestSegment.decode(bytes)
        #expect(back.entries == entries)
        #expect(back.header.entries == entries.count)
        #expect(back.header.folders == ["/srv/photos", "/home/alice/Pictures"])
        #expect(back.header.seq == 7 && back.header.kind == .log && back.header.through == 42)
        #expect(back.entries[1].path != back.entries[2].path)
    }

    @Test func theDigestCoversEveryByteAfterIt() throws {
        let bytes = ManifestSegment(header: header(), entries: [item(Array("a.jpg".utf8)), item(Array("b.jpg".utf8))]).encoded()
        #expect(Array(bytes[0..<8]) == ManifestSegment.magic)
        #expect(ManifestSegment.digestHex(of: bytes) == Hex.string(SHA256.digest(Array(bytes[40...]))))
        for position in [40, 44, bytes.count / 2, bytes.count - 1] {
            var flipped = bytes
            flipped[position] ^= 0x01
            #expect(throws: ManifestFormatError.digestMismatch) { try ManifestSegment.decode(flipped) }
        }
    }

    @Test func aSegmentCutShortIsNeverTakenForComplete() throws {
        let bytes = ManifestSegment(header: header(), entries: (0..<50).map { item(Array("f\($0).jpg".utf8)) }).encoded()
        for length in [0, 7, 39, 43, 44, 100, bytes.count - 1] {
            #expect(throws: ManifestFormatError.self) { try ManifestSegment.decode(Array(bytes.prefix(length))) }
        }
        var wrongMagic = bytes
        wrongMagic[7] = 2
        #expect(throws: ManifestFormatError.notAManifest) { try ManifestSegment.decode(wrongMagic) }
    }

    @Test func aSnapshotIndexCarriesItsPartsAndTotal() throws {
        var index = header(.snapshotIndex, seq: 12)
        index.parts = [.init(part: 1, sha256: String(repeating: "a", count: 64), entries: 3)]
        index.entries = 3
        let back = try ManifestSegment.decode(ManifestSegment(header: index, entries: []).encoded())
        #expect(back.header.parts == index.parts)
        #expect(back.header.entries == 3)
        #expect(back.entries.isEmpty)
    }

    @Test func sortedPathsShareTheirPrefixes() {
        let entries = (0..<1000).map { item(Array("2019/2019-05-03/IMG_20190503_\(100000 + $0).jpg".utf8), time: 1_800_000_000_000 + Int64($0)) }
        let bytes = ManifestSegment(header: header(), entries: entries).encoded()
        // Folder, lengths, a short suffix, kind, a 1 ms time delta, size, MD5, mtime: under 45 bytes a file.
        #expect(bytes.count < 45 * 1000)
    }

    @Test func md5ValuesRoundTrip() {
        let hex = "00ff00ff00ff00ff0000000000000001"
        let v = MD5Value(hex: hex)!
        #expect(v.hex == hex)
        #expect(MD5Value(bytes: v.bytes) == v)
        #expect(MD5Value(hex: "xyz") == nil)
        #expect(MD5Value(hex: String(repeating: "0", count: 31)) == nil)
    }

    @Test func varintsAtTheirLimits() {
        var w = ManifestByteWriter()
        let unsigned: [UInt64] = [0, 1, 127, 128, 300, UInt64(UInt32.max), UInt64.max]
        let signed: [Int64] = [0, -1, 1, Int64.min, Int64.max, -86_400]
        for v in unsigned { w.uvarint(v) }
        for v in signed { w.svarint(v) }
        var r = ManifestByteReader(w.bytes)
        for v in unsigned { #expect(r.uvarint() == v) }
        for v in signed { #expect(r.svarint() == v) }
        #expect(r.atEnd)
        var tooLong = ManifestByteReader(Array(repeating: 0xff, count: 11))
        #expect(tooLong.uvarint() == nil)
    }
}
