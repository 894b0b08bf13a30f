/// The catalog's pointer as read from the bucket.
package struct StoredPointer: Sendable, Equatable {
    package var body: [UInt8]
    /// Without quotes.
    package var etag: String

    package init(body: [UInt8], etag: String) {
        self.body = body
        self.etag = etag
    }
}
