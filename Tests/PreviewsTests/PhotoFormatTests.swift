import Testing
import Previews

/// The format from a file's first bytes (app-catalog.md), including what is recognised only to be skipped.
@Suite struct PhotoFormatTests {
    static func tiff(make: String?, dngVersion: Bool = false, bigEndian: Bool = false) -> [UInt8] {
        // Little-endian TIFF, IFD0 at 8 with Make (ASCII at 100) and optionally DNGVersion.
        var b = [UInt8](repeating: 0, count: 200)
        b[0...3] = [0x49, 0x49, 0x2A, 0x00]
        b[4] = 8
        var entries: [[UInt8]] = []
        if let make {
            let n = UInt8(make.utf8.count + 1)
            entries.append([0x0F, 0x01, 2, 0, n, 0, 0, 0, 100, 0, 0, 0])
            b.replaceSubrange(100..<100 + make.utf8.count, with: Array(make.utf8))
        }
        if dngVersion { entries.append([0x12, 0xC6, 1, 0, 4, 0, 0, 0, 1, 4, 0, 0]) }
        b[8] = UInt8(entries.count)
        for (i, e) in entries.enumerated() { b.replaceSubrange(10 + i * 12..<22 + i * 12, with: e) }
        return b
    }

    static func iso(_ brand: String) -> [UInt8] { [0, 0, 0, 24] + Array("ftyp\(brand)".utf8) + [UInt8](repeating: 0, count: 20) }

    @Test(arguments: [
        ([0xFF, 0xD8, 0xFF, 0xE1] as [UInt8], PhotoFormat.jpeg),
        ([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0], .png),
        (Array("GIF89a....".utf8), .gif),
        (Array("RIFF\u{0}\u{0}\u{0}\u{0}WEBPVP8 ".utf8), .webp),
        (Array("RIFF\u{0}\u{0}\u{0}\u{0}AVI LIST".utf8), .video),
        (Array("FUJIFILMCCD-RAW 0201".utf8), .raf),
        ([0x49, 0x49, 0x55, 0x00, 0x18, 0, 0, 0], .rw2),
        (Array("IIRO\u{8}\u{0}\u{0}\u{0}".utf8), .orf),
        ([0x49, 0x49, 0x2A, 0x00, 0x10, 0, 0, 0, 0x43, 0x52, 2, 0], .cr2),
        (PhotoFormatTests.iso("heic"), .heif),
        (PhotoFormatTests.iso("mif1"), .heif),
        (PhotoFormatTests.iso("crx "), .cr3),
        (PhotoFormatTests.iso("isom"), .video),
        (PhotoFormatTests.iso("qt  "), .video),
        (PhotoFormatTests.iso("avif"), .unknown),
        ([0x1A, 0x45, 0xDF, 0xA3], .video),
        (Array("hello, world".utf8), .unknown),
        ([], .unknown),
    ])
    func firstBytes(_ head: [UInt8], _ format: PhotoFormat) {
        #expect(PhotoFormat.sniff(head) == format)
    }

    @Test func aBitmapNeedsAKnownHeaderSize() {
        var bmp: [UInt8] = Array("BM".utf8) + [UInt8](repeating: 0, count: 40)
        bmp[14] = 40
        #expect(PhotoFormat.sniff(bmp) == .bmp)
        bmp[14] = 7
        #expect(PhotoFormat.sniff(bmp) == .unknown, "two letters are not enough to call it a BMP")
    }

    @Test func tiffBasedRawsAreToldByTheirFirstDirectory() {
        #expect(PhotoFormat.sniff(Self.tiff(make: "NIKON CORPORATION")) == .nef)
        #expect(PhotoFormat.sniff(Self.tiff(make: "SONY")) == .arw)
        #expect(PhotoFormat.sniff(Self.tiff(make: "OLYMPUS IMAGING CORP.")) == .orf)
        #expect(PhotoFormat.sniff(Self.tiff(make: "Canon", dngVersion: true)) == .dng)
        #expect(PhotoFormat.sniff(Self.tiff(make: "Epson scanner")) == .tiff)
        #expect(PhotoFormat.sniff(Self.tiff(make: nil)) == .tiff)
    }

    @Test func aDirectoryPointingOutsideTheBytesIsAPlainTIFF() {
        var b = Self.tiff(make: "NIKON")
        b[4] = 0xF0; b[5] = 0xFF  // IFD0 far beyond the bytes read
        #expect(PhotoFormat.sniff(b) == .tiff)
    }

    @Test func onlyTheAppsFormatsHaveCatalogNames() {
        #expect(PhotoFormat.cr2.catalogName == "RAW-CR2" && PhotoFormat.heif.catalogName == "HEIF")
        for skipped in [PhotoFormat.cr3, .rw2, .video, .unknown] { #expect(skipped.catalogName == nil) }
        #expect(PhotoFormat.allCases.filter { $0.catalogName != nil }.count == 13)
    }
}
