import RestoreWire
import Testing
import RestoreRelay

/// The extension an exported file gets: the catalog's format, then `original-format`, the
/// content type, and the first bytes (privacy.md).
@Suite struct ExportFormatSourcesTests {
    @Test(arguments: [
        ("JPEG", "jpg"), ("HEIF", "heic"), ("PNG", "png"), ("TIFF", "tif"), ("GIF", "gif"), ("WEBP", "webp"), ("BMP", "bmp"),
        ("RAW-DNG", "dng"), ("RAW-CR2", "cr2"), ("RAW-CR3", "cr3"), ("RAW-NEF", "nef"), ("RAW-ARW", "arw"), ("RAW-ORF", "orf"),
        ("RAW-RAF", "raf"), ("RAW-RW2", "rw2"), ("MOV", "mov"), ("MP4", "mp4"), (" jpeg ", "jpg"),
    ])
    func formatWords(word: String, ext: String) {
        #expect(ExportFormat.ext(word: word) == ext)
    }

    @Test func wordsThatSayNothingAreNotGuessed() {
        for word in ["UNKNOWN", "", "RAW", "exe", "../jpg", "JPEG,PNG"] { #expect(ExportFormat.ext(word: word) == nil, "\(word)") }
        #expect(ExportFormat.ext(word: nil) == nil)
    }

    @Test func contentTypes() {
        #expect(ExportFormat.ext(contentType: "image/jpeg") == "jpg")
        #expect(ExportFormat.ext(contentType: "IMAGE/HEIF; charset=binary") == "heic")
        #expect(ExportFormat.ext(contentType: "video/quicktime") == "mov")
        #expect(ExportFormat.ext(contentType: "video/mp4") == "mp4")
        #expect(ExportFormat.ext(contentType: "image/x-panasonic-rw2") == "rw2")
        #expect(ExportFormat.ext(contentType: "application/octet-stream") == nil)
        #expect(ExportFormat.ext(contentType: "text/html") == nil)
    }

    @Test func theCatalogFirstThenOriginalFormatThenTheContentType() {
        #expect(ExportFormat.ext(catalogFormat: "PNG", originalFormat: "JPEG", contentType: "image/gif") == "png")
        #expect(ExportFormat.ext(catalogFormat: "nonsense", originalFormat: "JPEG", contentType: "image/gif") == "jpg")
        #expect(ExportFormat.ext(catalogFormat: nil, originalFormat: "UNKNOWN", contentType: "image/gif") == "gif")
        #expect(ExportFormat.ext(catalogFormat: nil, originalFormat: "UNKNOWN", contentType: "application/octet-stream") == nil)
    }

    static func iso(_ brand: String) -> [UInt8] { [0, 0, 0, 24] + Array("ftyp".utf8) + Array(brand.utf8) + [UInt8](repeating: 0, count: 12) }

    @Test func theFirstBytesWhenNothingElseSays() {
        #expect(ExportFormat.ext(head: [0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 0, count: 20)) == "jpg")
        #expect(ExportFormat.ext(head: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) == "png")
        #expect(ExportFormat.ext(head: Self.iso("heic")) == "heic")
        #expect(ExportFormat.ext(head: Self.iso("crx ")) == "cr3")
        #expect(ExportFormat.ext(head: Self.iso("qt  ")) == "mov")
        #expect(ExportFormat.ext(head: Self.iso("isom")) == "mp4")
        #expect(ExportFormat.ext(head: Self.iso("mp42")) == "mp4")
        #expect(ExportFormat.ext(head: Array("GIF89a".utf8)) == "gif")
        #expect(ExportFormat.ext(head: Array("RIFF\0\0\0\0WEBP".utf8)) == "webp")
        // AVI and Matroska are videos, but neither .mov nor .mp4.
        #expect(ExportFormat.ext(head: Array("RIFF\0\0\0\0AVI LIST".utf8)) == "bin")
        #expect(ExportFormat.ext(head: [0x1A, 0x45, 0xDF, 0xA3, 0, 0]) == "bin")
        #expect(ExportFormat.ext(head: Array("hello, world".utf8)) == "bin")
        #expect(ExportFormat.ext(head: []) == "bin")
    }
}
