import Digests
import Testing

@Suite struct HexTests {
    @Test("lowercase out, both cases in, round trip over every byte value")
    func roundTrip() {
        let all = (0...255).map(UInt8.init)
        let text = Hex.string(all)
        #expect(text.count == 512)
        #expect(text.hasPrefix("000102") && text.hasSuffix("fdfeff"))
        #expect(Hex.bytes(text) == all)
        #expect(Hex.bytes(text.uppercased()) == all)
        #expect(Hex.string([]) == "" && Hex.bytes("") == [])
    }

    @Test("odd lengths and non-digits are refused", arguments: ["a", "abc", "zz", "0g", " 0", "+f", "-1"])
    func refused(_ text: String) {
        #expect(Hex.bytes(text) == nil)
    }
}
