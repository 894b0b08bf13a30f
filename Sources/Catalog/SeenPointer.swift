/// The catalog's pointer as last seen: its ETag and the snapshot MD5 it names.
package struct SeenPointer: Sendable, Equatable {
    package var etag: String
    package var md5: String

    package init(etag: String, md5: String) {
        self.etag = etag
        self.md5 = md5
    }
}
