import Testing
import PhotolalaCore

@Suite struct UnitsTests {
    @Test(arguments: [
        ("90s", 90_000), ("15m", 900_000), ("6h", 21_600_000), ("1h30m", 5_400_000), ("250ms", 250),
        ("5", 5000), ("0.5", 500), ("2d", 172_800_000), (" 5s ", 5000),
    ])
    func durations(text: String, ms: Int64) {
        #expect(Units.parseDuration(text) == .milliseconds(ms))
    }

    @Test(arguments: ["", "5x", "s", "-5s", "five", "5s5"])
    func badDurations(text: String) {
        #expect(Units.parseDuration(text) == nil)
    }

    @Test(arguments: [
        ("16MiB", Int64(16 << 20)), ("1GiB", 1 << 30), ("500KB", 500_000), ("1048576", 1_048_576), ("5 MiB", 5 << 20), ("1.5KiB", 1536),
    ])
    func sizes(text: String, bytes: Int64) {
        #expect(Units.parseSize(text) == bytes)
    }

    @Test(arguments: ["", "MiB", "16 furlongs", "-1MiB", "99999999999TiB"])
    func badSizes(text: String) {
        #expect(Units.parseSize(text) == nil)
    }

    @Test func rates() {
        #expect(Units.parseRate("off") == .some(nil))
        #expect(Units.parseRate("10MiB/s") == .some(10 << 20))
        #expect(Units.parseRate("10MiB") == nil)
        #expect(Units.parseRate("0/s") == nil)
    }

    @Test func formatting() {
        #expect(Units.format(.seconds(21600)) == "6h")
        #expect(Units.format(.seconds(90)) == "90s")
        #expect(Units.format(.seconds(300)) == "5m")
        #expect(Units.format(.milliseconds(250)) == "250ms")
        #expect(Units.formatSize(16 << 20) == "16MiB")
        #expect(Units.formatSize(1000) == "1000")
        #expect(Units.humanBytes(1_234_567) == "1.2 MB")
        #expect(Units.humanBytes(12) == "12 B")
    }
}
