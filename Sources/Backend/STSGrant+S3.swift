import Bucket

/// How every stage reaches its part of the bucket with a grant: one place that turns the
/// backend's answer into the S3 client's configuration and signing keys.
extension STSGrant {
    /// The grant's keys, as the S3 client signs with them.
    package var s3Credentials: S3Credentials {
        S3Credentials(accessKeyId: accessKeyId, secretAccessKey: secretAccessKey, sessionToken: sessionToken,
                      expiration: expiration)
    }

    /// The grant's bucket, refusing any key outside `keyPrefix`, over connections checked
    /// against `trust` (the system's CA store plus `tls.ca_file`).
    package func s3Configuration(keyPrefix: String, trust: TLSTrust) -> S3Client.Configuration {
        var configuration = S3Client.Configuration(bucket: bucket, region: region, endpoint: endpoint,
                                                   requiredKeyPrefix: keyPrefix)
        configuration.trust = trust
        return configuration
    }
}
