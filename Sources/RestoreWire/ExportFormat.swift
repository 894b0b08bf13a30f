/// The extensions an exported photo may get (privacy.md "Export every photo of the
/// account"): the daemon picks one for each object (`RestoreRelay`, from the catalog, the
/// object's headers or its first bytes) and the command believes only these.
package enum ExportFormat {
    /// Every extension an export writes; anything else is `bin`.
    package static let extensions: [String] = [
        "jpg", "heic", "png", "tif", "gif", "webp", "bmp", "dng", "cr2", "cr3", "nef", "arw", "orf", "raf", "rw2", "mov", "mp4", "bin",
    ]

    /// What the command believes of an extension the daemon sent: one of the list, else `bin`.
    package static func known(_ ext: String) -> String {
        extensions.contains(ext) ? ext : "bin"
    }
}
