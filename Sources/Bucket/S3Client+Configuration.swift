import Foundation

/// Which bucket, where, and the limits every request is held to.
extension S3Client {
    package struct Configuration: Sendable, Equatable {
        package var bucket: String
        package var region: String
        /// An S3-compatible endpoint (`http://127.0.0.1:5055`): path-style addressing.
        /// Nil: AWS, virtual-hosted (`https://bucket.s3.region.amazonaws.com/key`).
        package var endpoint: String?
        /// When set, every operation refuses a key outside this prefix
        /// (`photos/<userId>/`): a last guard against writing where the session policy
        /// would deny it anyway, or worse, where it would not.
        package var requiredKeyPrefix: String?
        /// Every request gets at least this long to be sent and answered…
        package var minimumRequestTimeout: TimeInterval = 60
        /// …plus its body size divided by this many bytes per second (a floor on a
        /// slow uplink, not an expectation).
        package var minimumThroughput: Double = 100 * 1024
        /// Bytes read from the file per body chunk.
        package var chunkSize: Int = 256 * 1024
        /// Largest response body read into memory (ListParts pages are the biggest, ~300 KB).
        package var maximumResponseBytes: Int = 16 << 20
        /// What an https endpoint's certificate is verified against (`tls.ca_file`).
        package var trust: TLSTrust = .system

        package init(bucket: String, region: String, endpoint: String? = nil, requiredKeyPrefix: String? = nil) {
            self.bucket = bucket
            self.region = region
            self.endpoint = endpoint
            self.requiredKeyPrefix = requiredKeyPrefix
        }
    }
}
