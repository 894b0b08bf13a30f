import Previews
import RestoreWire

/// The extension an exported photo gets (privacy.md "Export every photo of the account"),
/// as the daemon finds it from what says what the object is, most trusted first: the
/// apps' catalog row's `format`, the object's `x-amz-meta-original-format`, its content
/// type, and last its first bytes. Every source may be anything (the bucket and the
/// catalog are written by others): a word this does not know says nothing, and the next
/// source is asked. The extensions themselves, which the command checks again, are the
/// wire's (`RestoreWire.ExportFormat`).
extension ExportFormat {
    /// The catalog's `format` column and `original-format` share one vocabulary
    /// (app-catalog.md, s3-layout.md); `UNKNOWN` and anything else say nothing.
    private static let words: [String: String] = [
        "JPEG": "jpg", "HEIF": "heic", "HEIC": "heic", "PNG": "png", "TIFF": "tif", "GIF": "gif", "WEBP": "webp", "BMP": "bmp",
        "RAW-DNG": "dng", "RAW-CR2": "cr2", "RAW-CR3": "cr3", "RAW-NEF": "nef", "RAW-ARW": "arw", "RAW-ORF": "orf",
        "RAW-RAF": "raf", "RAW-RW2": "rw2", "MOV": "mov", "MP4": "mp4",
    ]

    /// s3-layout.md's content types, and the spellings other writers use for the same.
    private static let contentTypes: [String: String] = [
        "image/jpeg": "jpg", "image/jpg": "jpg", "image/pjpeg": "jpg",
        "image/heif": "heic", "image/heic": "heic", "image/heif-sequence": "heic", "image/heic-sequence": "heic",
        "image/png": "png", "image/tiff": "tif", "image/gif": "gif", "image/webp": "webp",
        "image/bmp": "bmp", "image/x-ms-bmp": "bmp",
        "image/x-adobe-dng": "dng", "image/x-canon-cr2": "cr2", "image/x-canon-cr3": "cr3", "image/x-nikon-nef": "nef",
        "image/x-sony-arw": "arw", "image/x-olympus-orf": "orf", "image/x-fuji-raf": "raf", "image/x-panasonic-rw2": "rw2",
        "video/quicktime": "mov", "video/mp4": "mp4",
    ]

    /// From a catalog row's `format` or an `original-format` header; nil when it says nothing.
    package static func ext(word: String?) -> String? {
        guard let word else { return nil }
        return words[word.trimmingSpaces.uppercased()]
    }

    /// From a `Content-Type` (parameters and case ignored); nil for
    /// `application/octet-stream` and anything else it does not name.
    package static func ext(contentType: String?) -> String? {
        guard let contentType else { return nil }
        let type = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        return contentTypes[type.trimmingSpaces.lowercased()]
    }

    /// From the object's first bytes (up to `PhotoFormat.sniffLength`): always an answer.
    package static func ext(head: [UInt8]) -> String {
        switch PhotoFormat.sniff(head) {
        case .jpeg: "jpg"
        case .png: "png"
        case .heif: "heic"
        case .tiff: "tif"
        case .gif: "gif"
        case .webp: "webp"
        case .bmp: "bmp"
        case .cr2: "cr2"
        case .cr3: "cr3"
        case .nef: "nef"
        case .arw: "arw"
        case .dng: "dng"
        case .orf: "orf"
        case .raf: "raf"
        case .rw2: "rw2"
        // QuickTime's brand is a .mov; the other ISO brands are MPEG-4 files. AVI and
        // Matroska are neither of the extensions privacy.md lists.
        case .video: isoBrand(head).map { $0 == "qt  " ? "mov" : "mp4" } ?? "bin"
        case .unknown: "bin"
        }
    }

    /// The first source that says something, in privacy.md's order; nil when only the
    /// bytes can tell.
    package static func ext(catalogFormat: String?, originalFormat: String?, contentType: String?) -> String? {
        ext(word: catalogFormat) ?? ext(word: originalFormat) ?? ext(contentType: contentType)
    }

    private static func isoBrand(_ head: [UInt8]) -> String? {
        guard head.count >= 12, Array(head[4..<8]) == Array("ftyp".utf8) else { return nil }
        return String(decoding: head[8..<12], as: UTF8.self)
    }
}

extension String {
    /// Without the spaces and tabs around it.
    var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" || c == "\r" { s = s.dropLast() }
        return String(s)
    }
}
