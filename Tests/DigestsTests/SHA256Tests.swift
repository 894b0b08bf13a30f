import Digests
import Testing

@Suite struct SHA256Tests {
    /// FIPS 180-2, appendix B (one-block, multi-block and long messages), and the empty string.
    static let fips180: [(String, String)] = [
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ]

    @Test("FIPS 180 examples", arguments: fips180)
    func fips180Vectors(message: String, expected: String) {
        #expect(SHA256.hexDigest(message) == expected)
        #expect(SHA256.hexDigest(Array(message.utf8)) == expected)
        #expect(Hex.string(SHA256.digest(message)) == expected)
    }

    @Test("FIPS 180: one million 'a', fed a thousand at a time")
    func millionA() {
        let thousand = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        var sha = SHA256()
        for _ in 0..<1000 { sha.update(thousand) }
        #expect(sha.finishHex() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("strings, bytes and raw buffers hash alike; finalize starts over")
    func feedsAndFinalize() {
        var sha = SHA256()
        sha.update("a")
        sha.update([UInt8(ascii: "b")])
        [UInt8(ascii: "c")].withUnsafeBytes { sha.update($0) }
        #expect(Hex.string(sha.finalize()) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(sha.finishHex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.digest([]).count == SHA256.byteCount)
    }
}
