import Testing
import Web

/// The pairing address as a QR code (libqrencode) and its SVG. That it decodes to the
/// address is checked by `zbarimg` in Tests/e2e/test_web.py.
@Suite struct QRCodeTests {
    let url = "https://photolala.app/pair?code=WDJB-MJHT"

    @Test func aURLBecomesASquareCodeWithItsFinderPatterns() throws {
        let code = try #require(QRCode(url))
        #expect(code.width >= 21 && (code.width - 17) % 4 == 0)
        #expect(code.modules.count == code.width * code.width)
        // The three finder patterns: a dark 7×7 ring around a light ring around a dark 3×3.
        for (ox, oy) in [(0, 0), (code.width - 7, 0), (0, code.width - 7)] {
            #expect(code.isDark(x: ox, y: oy) && code.isDark(x: ox + 6, y: oy + 6))
            #expect(!code.isDark(x: ox + 1, y: oy + 1))
            #expect(code.isDark(x: ox + 3, y: oy + 3))
        }
    }

    @Test func theSVGDrawsEveryDarkModuleOnceWithAQuietZone() throws {
        let code = try #require(QRCode(url))
        let svg = code.svg(label: "code <for> \"you\"")
        let side = code.width + 8
        #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(side) \(side)\""))
        #expect(svg.contains("aria-label=\"code &lt;for&gt; &quot;you&quot;\""))
        // Each run is "M x y hN v1 h-N z": the runs' lengths add up to the dark modules.
        let runs = svg.split(separator: "M").dropFirst()
        let dark = runs.reduce(0) { sum, run in
            sum + (Int(run.split(separator: "h")[1].split(separator: "v")[0]) ?? 0)
        }
        #expect(dark == code.modules.filter { $0 }.count)
        #expect(!svg.contains("<script"))
    }

    @Test func textTooLongForAQRCodeIsNil() {
        #expect(QRCode(String(repeating: "x", count: 5000)) == nil)
    }
}
