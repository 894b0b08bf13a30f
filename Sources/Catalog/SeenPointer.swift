/// The catalog's pointer as last seen: its ETag and the snapshot MD5 it names.
public struct SeenPointer: Sendable, Equatable {
    public var etag: String
    public var md5: String

    public init(etag: String, md5: String) {
        self.etag = etag
        self.md5 = md5
    }
}
