/// Content type and `x-amz-meta-original-format` of a photo or video, by its extension
/// (shared/spec/s3-layout.md).
package struct MediaType: Sendable, Equatable {
    package var contentType: String
    package var originalFormat: String

    package init(contentType: String, originalFormat: String) {
        self.contentType = contentType
        self.originalFormat = originalFormat
    }

    package static func forPath(_ path: String) -> MediaType {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let dot = name.lastIndex(of: ".") else { return unknown }
        return table[name[name.index(after: dot)...].lowercased()] ?? unknown
    }

    package static let unknown = MediaType(contentType: "application/octet-stream", originalFormat: "UNKNOWN")

    static let table: [String: MediaType] = [
        "jpg": .init(contentType: "image/jpeg", originalFormat: "JPEG"),
        "jpeg": .init(contentType: "image/jpeg", originalFormat: "JPEG"),
        "heic": .init(contentType: "image/heif", originalFormat: "HEIF"),
        "heif": .init(contentType: "image/heif", originalFormat: "HEIF"),
        "png": .init(contentType: "image/png", originalFormat: "PNG"),
        "tif": .init(contentType: "image/tiff", originalFormat: "TIFF"),
        "tiff": .init(contentType: "image/tiff", originalFormat: "TIFF"),
        "gif": .init(contentType: "image/gif", originalFormat: "GIF"),
        "webp": .init(contentType: "image/webp", originalFormat: "WEBP"),
        "cr2": .init(contentType: "image/x-canon-cr2", originalFormat: "RAW-CR2"),
        "cr3": .init(contentType: "image/x-canon-cr3", originalFormat: "RAW-CR3"),
        "nef": .init(contentType: "image/x-nikon-nef", originalFormat: "RAW-NEF"),
        "arw": .init(contentType: "image/x-sony-arw", originalFormat: "RAW-ARW"),
        "dng": .init(contentType: "image/x-adobe-dng", originalFormat: "RAW-DNG"),
        "orf": .init(contentType: "image/x-olympus-orf", originalFormat: "RAW-ORF"),
        "raf": .init(contentType: "image/x-fuji-raf", originalFormat: "RAW-RAF"),
        "rw2": .init(contentType: "image/x-panasonic-rw2", originalFormat: "RAW-RW2"),
        "mov": .init(contentType: "video/quicktime", originalFormat: "MOV"),
        "mp4": .init(contentType: "video/mp4", originalFormat: "MP4"),
    ]
}
