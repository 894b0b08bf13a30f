import Digests
import Foundation
import Testing
import Vault
import ManifestFormat

/// The deflated JSON inside format-2 objects: it reads back, the first layout (plain JSON)
/// still opens, and a stream that is cut short, runs on or inflates too far is refused.
@Suite struct SealedJSONTests {
    let key = AccountKey.generate().metadataKey
    let layout = ManifestKeys(userId: "U", deviceId: "7d1e4c2a-9b3f-4e55-8c61-2f0a9d8e7b14")
    let json = Array(#"{"createdAt":"2026-11-22T07:00:00Z","device":"7d1e4c2a-9b3f-4e55-8c61-2f0a9d8e7b14","entries":1,"folders":["/srv/photos/family"],"format":2,"kind":"log","prev":"9f2c0a1b9f2c0a1b9f2c0a1b9f2c0a1b9f2c0a1b9f2c0a1b9f2c0a1b9f2c0a1b","seq":17}"#.utf8)

    @Test func packedJSONReadsBackAndIsSmaller() throws {
        let packed = SealedJSON.pack(json)
        #expect(packed.first == 0x78)
        #expect(packed.count < json.count * 3 / 4)
        #expect(SealedJSON.unpack(packed) == json)
        // The first format-2 layout: the JSON itself.
        #expect(SealedJSON.unpack(json) == json)
    }

    @Test func whatIsNeitherJSONNorOneWholeStreamIsRefused() {
        let packed = SealedJSON.pack(json)
        #expect(SealedJSON.unpack([]) == nil)
        #expect(SealedJSON.unpack(Array("[1]".utf8)) == nil)
        #expect(SealedJSON.unpack(Array(packed.dropLast())) == nil)              // cut short
        #expect(SealedJSON.unpack(Array(packed.prefix(2))) == nil)
        #expect(SealedJSON.unpack(packed + [0]) == nil)                          // something after the stream
        var flipped = packed
        flipped[packed.count / 2] ^= 0x40
        #expect(SealedJSON.unpack(flipped) == nil)                               // the stream's Adler-32 no longer holds
    }

    @Test func aStreamInflatingPastTheLimitIsRefused() {
        #expect(SealedJSON.unpack(SealedJSON.pack(json), limit: json.count - 1) == nil)
        #expect(SealedJSON.unpack(SealedJSON.pack(json), limit: json.count) == json)
        // 17 MiB of spaces deflate to a few kilobytes: refused once past 16 MiB, not read.
        let bomb = SealedJSON.pack(Array("{".utf8) + Array(repeating: 0x20, count: 17 << 20) + Array("}".utf8))
        #expect(bomb.count < 64 << 10)
        #expect(SealedJSON.unpack(bomb) == nil)
    }

    @Test func aSegmentSealedWithItsHeaderAsPlainJSONStillOpens() throws {
        let entry = ManifestEntry(kind: .appeared, folder: "/srv/photos", path: Array("a.jpg".utf8), time: 1_800_000_000_000,
                                  version: FileVersion(size: 10, md5: MD5Value(hex: "0123456789abcdef0123456789abcdef")!,
                                                       mtimeSec: 1_700_000_000, mtimeNsec: 0, sha256: SHA256Value(bytes: Array(repeating: 3, count: 32))),
                                  owner: Ownership(uid: 1000, gid: 100, user: "alice", group: "users", mode: 0o640))
        let header = ManifestHeader(kind: .log, device: layout.deviceId, seq: 1, createdAt: "2026-11-22T07:00:00Z", prev: ManifestHeader.noPrevious)
        let objectKey = layout.log(1)
        let segment = ManifestSegment(header: header, entries: [entry])
        let (written, plaintext) = try ManifestSegment.open(segment.sealed(key: key, objectKey: objectKey), key: key, objectKey: objectKey)
        #expect(written.entries == [entry])
        // Take the new plaintext apart and put it back with the header inflated.
        let length = Int(plaintext[0]) << 24 | Int(plaintext[1]) << 16 | Int(plaintext[2]) << 8 | Int(plaintext[3])
        #expect(plaintext[4] == 0x78)
        let headerJSON = try #require(SealedJSON.unpack(Array(plaintext[4..<(4 + length)])))
        let n = UInt32(headerJSON.count)
        let firstLayout = [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + headerJSON + plaintext[(4 + length)...]
        let old = SealedObject.seal(firstLayout, key: key, objectKey: objectKey)
        #expect(try ManifestSegment.open(old, key: key, objectKey: objectKey).segment == written)
        // A header that is neither is refused, and says why.
        var broken = plaintext
        broken[4] = UInt8(ascii: "[")
        #expect(throws: ManifestFormatError.badHeader("it is neither JSON nor a zlib stream of at most 16 MiB of it")) {
            try ManifestSegment.open(SealedObject.seal(broken, key: key, objectKey: objectKey), key: key, objectKey: objectKey)
        }
    }

    @Test func aDeviceRecordIsSealedCompactAndTheFirstLayoutStillOpens() throws {
        let record = DeviceRecord(deviceId: layout.deviceId, name: "nas-livingroom", folders: ["/srv/photos"], lastBackupAt: "2026-11-22T07:00:00Z",
                                  files: 58113, bytes: 912_345_678, logSeq: 212, snapshotSeq: 180, updatedAt: "2026-11-22T07:00:03Z",
                                  software: "photolalad 0.1.0", counter: 215, head: ManifestHead(seq: 212, sha256: String(repeating: "9f", count: 32)))
        let objectKey = layout.record
        let sealed = record.sealed(key: key, objectKey: objectKey)
        #expect(try DeviceRecord.open(sealed, key: key, objectKey: objectKey) == record)
        // Under two thirds of the indented JSON the first layout sealed.
        #expect(sealed.count - SealedObject.overhead < record.encoded().count * 2 / 3)
        let old = SealedObject.seal(record.encoded(), key: key, objectKey: objectKey)
        #expect(try DeviceRecord.open(old, key: key, objectKey: objectKey) == record)
        #expect(throws: ManifestFormatError.badHeader("it is not a format-2 device record")) {
            try DeviceRecord.open(SealedObject.seal(Array(record.sealedPlaintext().dropLast()), key: key, objectKey: objectKey), key: key, objectKey: objectKey)
        }
    }
}
