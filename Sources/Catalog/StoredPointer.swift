/// The catalog's pointer as read from the bucket.
public struct StoredPointer: Sendable, Equatable {
    public var body: [UInt8]
    /// Without quotes.
    public var etag: String

    public init(body: [UInt8], etag: String) {
        self.body = body
        self.etag = etag
    }
}
