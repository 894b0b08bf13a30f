import Digests
import Testing

@Suite struct MD5Tests {
    /// RFC 1321, appendix A.5 ("test suite").
    static let rfc1321: [(String, String)] = [
        ("", "d41d8cd98f00b204e9800998ecf8427e"),
        ("a", "0cc175b9c0f1b6a831c399e269772661"),
        ("abc", "900150983cd24fb0d6963f7d28e17f72"),
        ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
        ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
        (String(repeating: "1234567890", count: 8), "57edf4a22be3c955ac49da2e2107b67a"),
    ]

    @Test("RFC 1321 test suite", arguments: rfc1321)
    func rfc1321Vectors(message: String, expected: String) {
        #expect(Hex.string(MD5.digest(Array(message.utf8))) == expected)
    }

    @Test func knownVectors() {
        #expect(Hex.string(MD5.digest([])) == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(Hex.string(MD5.digest(Array("The quick brown fox jumps over the lazy dog".utf8))) == "9e107d9d372bb6826bd81d3542a419d6")
        #expect(Hex.bytes("9e107d9d372bb6826bd81d3542a419d6") == MD5.digest(Array("The quick brown fox jumps over the lazy dog".utf8)))
    }

    @Test("fed in pieces of any size, the digest is the one-shot digest")
    func streamingMatchesOneShot() {
        let bytes = (0..<100_003).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let expected = MD5.digest(bytes)
        for piece in [1, 63, 64, 65, 4096, 99_999] {
            var md5 = MD5()
            var start = 0
            while start < bytes.count {
                let end = min(start + piece, bytes.count)
                bytes[start..<end].withUnsafeBytes { md5.update($0) }
                start = end
            }
            #expect(md5.finish() == expected, "pieces of \(piece)")
        }
    }

    @Test("finalize answers the digest so far and starts over")
    func finalizeStartsOver() {
        var md5 = MD5()
        md5.update(Array("abc".utf8))
        #expect(Hex.string(md5.finalize()) == "900150983cd24fb0d6963f7d28e17f72")
        #expect(Hex.string(md5.finalize()) == "d41d8cd98f00b204e9800998ecf8427e")
        md5.update(Array("a".utf8))
        #expect(md5.finish().count == MD5.byteCount)
    }

    @Test("an empty buffer (nil base address) changes nothing")
    func emptyUpdate() {
        var md5 = MD5()
        md5.update(UnsafeRawBufferPointer(start: nil, count: 0))
        md5.update([])
        #expect(Hex.string(md5.finish()) == "d41d8cd98f00b204e9800998ecf8427e")
    }
}
