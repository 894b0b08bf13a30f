import Testing
import Previews

/// The worker's own BMP reader, on files built here byte by byte.
@Suite struct BMPDecoderTests {
    static func bmp(width: Int, height: Int, bits: Int, compression: Int = 0, palette: [[UInt8]] = [], rows: [[UInt8]]) -> [UInt8] {
        func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
        func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
        let stride = ((width * bits + 31) / 32) * 4
        let pixels = rows.flatMap { $0 + [UInt8](repeating: 0, count: stride - $0.count) }
        let offset = 14 + 40 + palette.count * 4
        var b = Array("BM".utf8) + le32(offset + pixels.count) + le32(0) + le32(offset)
        b += le32(40) + le32(width) + le32(height) + le16(1) + le16(bits) + le32(compression) + le32(pixels.count)
        b += le32(2835) + le32(2835) + le32(palette.count) + le32(0)
        for c in palette { b += [c[2], c[1], c[0], 0] }
        return b + pixels
    }

    @Test func twentyFourBitBottomUpRowsComeOutTopDown() throws {
        // Stored bottom row first: blue, then red on top. BGR byte order.
        let file = Self.bmp(width: 1, height: 2, bits: 24, rows: [[255, 0, 0], [0, 0, 255]])
        let bitmap = try BMPDecoder.decode(file, maximumPixels: 100).get()
        #expect(bitmap.width == 1 && bitmap.height == 2)
        #expect(bitmap.rgb == [255, 0, 0, 0, 0, 255])
    }

    @Test func eightBitPalette() throws {
        let file = Self.bmp(width: 2, height: 1, bits: 8, palette: [[10, 20, 30], [200, 100, 50]], rows: [[1, 0]])
        #expect(try BMPDecoder.decode(file, maximumPixels: 100).get().rgb == [200, 100, 50, 10, 20, 30])
    }

    @Test func runLengthCompressionIsRefusedWithAReason() {
        let file = Self.bmp(width: 2, height: 1, bits: 8, compression: 1, palette: [[0, 0, 0]], rows: [[0, 0]])
        guard case .failure(let why) = BMPDecoder.decode(file, maximumPixels: 100) else { Issue.record("decoded RLE"); return }
        #expect(why.description.contains("compression 1"))
    }

    @Test func aHugeDeclaredSizeIsRefusedFromTheHeader() {
        let file = Self.bmp(width: 100_000, height: 100_000, bits: 24, rows: [])
        guard case .failure(let why) = BMPDecoder.decode(file, maximumPixels: 250_000_000) else { Issue.record("accepted"); return }
        #expect(why.description.contains("100000 × 100000"))
    }

    @Test func pixelsCutShortAreRefused() {
        var file = Self.bmp(width: 4, height: 4, bits: 24, rows: Array(repeating: [UInt8](repeating: 9, count: 12), count: 4))
        file.removeLast(10)
        guard case .failure = BMPDecoder.decode(file, maximumPixels: 100) else { Issue.record("read past the end"); return }
    }
}
