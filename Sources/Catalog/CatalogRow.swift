/// One row this NAS publishes for one of its photos: the columns the thumbnail stage
/// filled (`photo` rows `ready`), written exactly as app-catalog.md spells them.
package struct CatalogRow: Sendable, Equatable {
    /// MD5 of the first 4096 bytes, 32 lowercase hex.
    package var headMD5: String
    package var size: Int64
    /// MD5 of the whole file, as in its `photos/` key.
    package var md5: String
    /// When it was taken, Unix seconds.
    package var date: Int64
    package var format: String

    package init(headMD5: String, size: Int64, md5: String, date: Int64, format: String) {
        self.headMD5 = headMD5
        self.size = size
        self.md5 = md5
        self.date = date
        self.format = format
    }

    /// Why the apps could not read this row, or nil when they can. A row with a problem
    /// is never published (the apps would drop it, or show a photo they cannot open).
    package var problem: String? {
        if !CatalogFormat.isLowercaseMD5(md5) { return "its MD5 \"\(md5)\" is not 32 lowercase hex digits" }
        if !CatalogFormat.isLowercaseMD5(headMD5) { return "its head MD5 \"\(headMD5)\" is not 32 lowercase hex digits" }
        if size < 0 { return "its size \(size) is negative" }
        if !CatalogFormat.formats.contains(format) { return "its format \"\(format)\" is not one the apps show" }
        return nil
    }

    /// The line without its `\n`.
    package var line: String { "\(headMD5),\(size),\(md5),\(date),\(format)" }
}
