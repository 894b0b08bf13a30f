/// Previews: reading a photo for the Photolala apps (format, head MD5, date, PTM-256
/// thumbnail), with every decoder in a sandboxed worker process.

/// What a file is, from its first bytes (app-catalog.md's `format` column). Only the
/// formats with a `catalogName` get a thumbnail and a catalog row; the others are
/// recognised so they can be skipped on purpose.
package enum PhotoFormat: String, Sendable, Equatable, CaseIterable {
    case jpeg, png, heif, tiff, gif, webp, bmp
    case cr2, nef, arw, dng, orf, raf
    case cr3, rw2, video, unknown

    /// The `format` column's value; nil for what the apps do not show.
    package var catalogName: String? {
        switch self {
        case .jpeg: "JPEG"
        case .png: "PNG"
        case .heif: "HEIF"
        case .tiff: "TIFF"
        case .gif: "GIF"
        case .webp: "WEBP"
        case .bmp: "BMP"
        case .cr2: "RAW-CR2"
        case .nef: "RAW-NEF"
        case .arw: "RAW-ARW"
        case .dng: "RAW-DNG"
        case .orf: "RAW-ORF"
        case .raf: "RAW-RAF"
        case .cr3, .rw2, .video, .unknown: nil
        }
    }

    /// Read through the camera's embedded preview (LibRaw).
    package var isRaw: Bool { [.cr2, .nef, .arw, .dng, .orf, .raf].contains(self) }

    /// How much of the file's start `sniff` may look at (TIFF-based RAWs name their
    /// maker in the first directory).
    package static let sniffLength = 64 * 1024

    /// The format of a file whose first bytes are `head`.
    package static func sniff(_ head: [UInt8]) -> PhotoFormat {
        func at(_ offset: Int, _ ascii: String) -> Bool {
            let bytes = Array(ascii.utf8)
            return head.count >= offset + bytes.count && Array(head[offset..<offset + bytes.count]) == bytes
        }
        func starts(_ bytes: [UInt8]) -> Bool { head.count >= bytes.count && Array(head[0..<bytes.count]) == bytes }

        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if at(0, "GIF87a") || at(0, "GIF89a") { return .gif }
        if at(0, "RIFF") && at(8, "WEBP") { return .webp }
        if at(0, "RIFF") && at(8, "AVI ") { return .video }
        if at(0, "FUJIFILMCCD-RAW") { return .raf }
        if starts([0x49, 0x49, 0x55, 0x00]) { return .rw2 }
        if at(0, "IIRO") || at(0, "IIRS") || at(0, "MMOR") { return .orf }
        if at(4, "ftyp") { return isoBrand(head) }
        if starts([0x1A, 0x45, 0xDF, 0xA3]) { return .video }  // Matroska, WebM
        if at(0, "BM"), head.count >= 26, TIFFDirectory.uint32(head, 14, littleEndian: true).map({ [12, 40, 52, 56, 64, 108, 124].contains($0) }) == true {
            return .bmp
        }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) {
            if at(8, "CR"), head.count > 10, head[10] == 2 { return .cr2 }
            return TIFFDirectory(head).map(tiffKind) ?? .tiff
        }
        return .unknown
    }

    /// ISO base media files: HEIF stills, Canon's CR3 and the video containers.
    private static func isoBrand(_ head: [UInt8]) -> PhotoFormat {
        guard head.count >= 12 else { return .unknown }
        let brand = String(decoding: head[8..<12], as: UTF8.self)
        switch brand {
        case "heic", "heix", "hevc", "hevx", "heim", "heis", "hevm", "hevs", "mif1", "msf1": return .heif
        case "crx ": return .cr3
        case "qt  ", "isom", "iso2", "iso4", "iso5", "iso6", "mp41", "mp42", "avc1", "M4V ", "M4VH", "M4VP", "3gp4", "3gp5", "3gp6", "3g2a", "dash", "XAVC", "MSNV", "f4v ":
            return .video
        default: return .unknown
        }
    }

    /// A TIFF file is a RAW when its first directory says so: DNG by its version tag,
    /// the others by their maker.
    private static func tiffKind(_ directory: TIFFDirectory) -> PhotoFormat {
        if directory.has(tag: 0xC612) { return .dng }
        let make = (directory.ascii(tag: 0x010F) ?? "").uppercased()
        if make.hasPrefix("NIKON") { return .nef }
        if make.hasPrefix("SONY") { return .arw }
        if make.hasPrefix("OLYMPUS") || make.hasPrefix("OM DIGITAL") { return .orf }
        return .tiff
    }
}
