import Digests
import Testing

@Suite struct HMACSHA256Tests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var key: [UInt8]
        var data: [UInt8]
        var expected: String
        var testDescription: String { name }
    }

    /// RFC 4231, section 4 (test case 5's output is truncated to 128 bits there).
    static let rfc4231: [Case] = [
        Case(name: "1", key: [UInt8](repeating: 0x0b, count: 20), data: Array("Hi There".utf8),
             expected: "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        Case(name: "2: a key shorter than the output", key: Array("Jefe".utf8),
             data: Array("what do ya want for nothing?".utf8),
             expected: "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        Case(name: "3: combined length over 64 bytes", key: [UInt8](repeating: 0xaa, count: 20),
             data: [UInt8](repeating: 0xdd, count: 50),
             expected: "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        Case(name: "4", key: Array(1...25), data: [UInt8](repeating: 0xcd, count: 50),
             expected: "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        Case(name: "5: truncated to 128 bits", key: [UInt8](repeating: 0x0c, count: 20),
             data: Array("Test With Truncation".utf8), expected: "a3b6167473100ee06e0c796c2955552b"),
        Case(name: "6: a key larger than the block", key: [UInt8](repeating: 0xaa, count: 131),
             data: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
             expected: "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
        Case(name: "7: key and data larger than the block", key: [UInt8](repeating: 0xaa, count: 131),
             data: Array(("This is a test using a larger than block-size key and a larger than block-size data. "
                 + "The key needs to be hashed before being used by the HMAC algorithm.").utf8),
             expected: "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
    ]

    @Test("RFC 4231 test cases", arguments: rfc4231)
    func rfc4231Vectors(_ c: Case) {
        let mac = Hex.string(HMACSHA256.authenticationCode(key: c.key, message: c.data))
        #expect(mac.hasPrefix(c.expected))
        #expect(mac.count == HMACSHA256.byteCount * 2)
    }

    @Test("a String message MACs its UTF-8; the hex form is lowercase")
    func stringMessages() {
        let key = Array("Jefe".utf8)
        let text = "what do ya want for nothing?"
        #expect(HMACSHA256.authenticationCode(key: key, message: text)
            == HMACSHA256.authenticationCode(key: key, message: Array(text.utf8)))
        #expect(HMACSHA256.hexAuthenticationCode(key: key, message: text)
            == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test("an empty key and an empty message are MACed, not refused")
    func emptyInputs() {
        #expect(HMACSHA256.hexAuthenticationCode(key: [], message: "")
            == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
        #expect(HMACSHA256.authenticationCode(key: [], message: UnsafeRawBufferPointer(start: nil, count: 0))
            == HMACSHA256.authenticationCode(key: [], message: [UInt8]()))
    }
}
