/// Catalog: the apps' catalog stage: our ready photos merged into the user's catalog and published without losing anyone's rows.

/// The apps' catalog as app-catalog.md defines it: where its objects live, its exact
/// header, the formats a row may name, and what a pointer holds. The user id goes into
/// every key verbatim (the apps spell it in uppercase): never change its case.
package enum CatalogFormat {
    package static let header = "photo_head_md5,file_size,photo_md5,photo_date,format"

    /// The formats the apps can show; any other photo is backed up without a row.
    package static let formats: Set<String> = [
        "JPEG", "PNG", "HEIF", "TIFF", "GIF", "WEBP", "BMP",
        "RAW-CR2", "RAW-NEF", "RAW-ARW", "RAW-DNG", "RAW-ORF", "RAW-RAF",
    ]

    package static func prefix(userId: String) -> String { "catalogs/\(userId)/" }

    package static func pointerKey(userId: String) -> String { prefix(userId: userId) + ".photolala.md5" }

    /// Snapshots are named by the MD5 of their own bytes, as the pointer spells it.
    package static func snapshotKey(userId: String, md5: String) -> String {
        prefix(userId: userId) + ".photolala.\(md5).csv"
    }

    package static func photoPrefix(userId: String) -> String { "photos/\(userId)/" }

    package static func photoKey(userId: String, md5: String) -> String { photoPrefix(userId: userId) + md5 + ".dat" }

    package static func thumbnailKey(userId: String, md5: String) -> String { "thumbnails/\(userId)/\(md5).jpg" }

    /// The MD5 a pointer names: its body without surrounding whitespace (readers trim it),
    /// or nil when that is not 32 hex digits. Kept in the case it was written in, since
    /// the snapshot's key is spelled with it.
    package static func pointerMD5(_ body: [UInt8]) -> String? {
        var slice = body[...]
        while let first = slice.first, isSpace(first) { slice = slice.dropFirst() }
        while let last = slice.last, isSpace(last) { slice = slice.dropLast() }
        guard slice.count == 32, slice.allSatisfy(isHex) else { return nil }
        return String(decoding: slice, as: UTF8.self)
    }

    /// What the pointer body we write holds: the snapshot's MD5 and nothing else, as the
    /// apps write it.
    package static func pointerBody(md5: String) -> [UInt8] { Array(md5.utf8) }

    /// 32 lowercase hex digits: how every MD5 in a row we write is spelled.
    package static func isLowercaseMD5(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    static func isHex(_ byte: UInt8) -> Bool {
        (48...57).contains(byte) || (97...102).contains(byte) || (65...70).contains(byte)
    }
}
