import Digests
import Foundation
import Testing
import ManifestFormat

@Suite struct ManifestEntryTests {
    static let md5Bytes: [UInt8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x00, 0x0f, 0xf0, 0xff, 0x10, 0x20, 0x30, 0x40]

    @Test func anMD5GoesBetweenBytesHexAndWordsUnchanged() throws {
        let value = try #require(MD5Value(bytes: Self.md5Bytes))
        #expect(value.high == 0x0123_4567_89ab_cdef && value.low == 0x000f_f0ff_1020_3040)
        #expect(value.bytes == Self.md5Bytes)
        #expect(value.hex == "0123456789abcdef000ff0ff10203040")
        #expect(MD5Value(hex: value.hex) == value)
        #expect(MD5Value(hex: "0123456789ABCDEF000FF0FF10203040") == value)
        // The generic form (Data, a slice) answers the same.
        #expect(MD5Value(bytes: Data(Self.md5Bytes)) == value)
        #expect(MD5Value(bytes: Self.md5Bytes[...]) == value)
        #expect(MD5Value(high: 0, low: 1).hex == "00000000000000000000000000000001")
    }

    @Test func anMD5RefusesAnythingButItsExactLength() {
        #expect(MD5Value(bytes: Array(Self.md5Bytes.dropLast())) == nil)
        #expect(MD5Value(bytes: Self.md5Bytes + [0]) == nil)
        #expect(MD5Value(hex: "0123456789abcdef000ff0ff1020304") == nil)
        #expect(MD5Value(hex: "0123456789abcdef000ff0ff102030400") == nil)
        #expect(MD5Value(hex: "0123456789abcdeg000ff0ff10203040") == nil)
        // Integer parsing would take a sign: a digest has none.
        #expect(MD5Value(hex: "+123456789abcdef000ff0ff10203040") == nil)
        #expect(MD5Value(hex: "0123456789abcdef-00ff0ff10203040") == nil)
        #expect(MD5Value(hex: "0123456789abcdé000ff0ff10203040") == nil)
    }

    @Test func aSHA256GoesBetweenBytesHexAndWordsUnchanged() throws {
        let bytes = Array(SHA256.digest(Array("photolala".utf8)))
        let value = try #require(SHA256Value(bytes: bytes))
        #expect(value.bytes == bytes)
        #expect(value.hex == Hex.string(bytes))
        #expect(SHA256Value(hex: value.hex) == value)
        #expect(SHA256Value(hex: value.hex.uppercased()) == value)
        #expect(SHA256Value(bytes: Data(bytes)) == value)
        #expect(SHA256Value(bytes: [0] + bytes.dropLast()) != value)
        #expect(SHA256Value(bytes: Array(bytes.dropLast())) == nil)
        #expect(SHA256Value(hex: String(value.hex.dropLast())) == nil)
        #expect(SHA256Value(hex: String(value.hex.dropLast()) + "x") == nil)
    }
}
