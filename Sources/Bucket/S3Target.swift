import Foundation

/// Where a bucket's requests go — AWS virtual-hosted or path-style, or an S3-compatible
/// endpoint: the origin, the Host header that is signed, and the path prefix (the
/// bucket, for path-style addressing).
package struct S3Target: Sendable, Equatable {
    package var origin: String
    package var hostHeader: String
    package var pathPrefix: String
    package var usesTLS: Bool
    /// Where the connection goes (without brackets for IPv6): what a certificate
    /// diagnosis connects to.
    package var connectHost: String
    package var connectPort: Int

    package init(_ configuration: S3Client.Configuration) throws(S3Error) {
        let bucket = configuration.bucket
        guard !bucket.isEmpty else {
            throw S3Error(kind: .permanent, code: "InvalidRequest", message: "no bucket configured")
        }
        guard let endpoint = configuration.endpoint else {
            let awsHost = "s3.\(configuration.region).amazonaws.com"
            usesTLS = true
            connectPort = 443
            if bucket.contains(".") {
                // A dotted bucket breaks the *.s3 wildcard certificate: path-style instead.
                origin = "https://" + awsHost
                hostHeader = awsHost
                connectHost = awsHost
                pathPrefix = "/" + SigV4Signer.encodePath(bucket)
            } else {
                hostHeader = "\(bucket).\(awsHost)"
                origin = "https://" + hostHeader
                connectHost = hostHeader
                pathPrefix = ""
            }
            return
        }
        guard let url = URL(string: endpoint), let scheme = url.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let rawHost = url.host, !rawHost.isEmpty else {
            throw S3Error(kind: .permanent, code: "InvalidRequest",
                          message: "endpoint \(endpoint) is not an http:// or https:// URL with a host")
        }
        usesTLS = scheme == "https"
        let host = rawHost.contains(":") && !rawHost.hasPrefix("[") ? "[\(rawHost)]" : rawHost
        let defaultPort = usesTLS ? 443 : 80
        connectHost = rawHost.hasPrefix("[") ? String(rawHost.dropFirst().dropLast()) : rawHost
        connectPort = url.port ?? defaultPort
        hostHeader = url.port.map { $0 == defaultPort ? host : "\(host):\($0)" } ?? host
        origin = "\(scheme)://\(hostHeader)"
        var basePath = url.path
        while basePath.hasSuffix("/") { basePath.removeLast() }
        pathPrefix = (basePath.isEmpty ? "" : SigV4Signer.encodePath(basePath)) + "/" + SigV4Signer.encodePath(bucket)
    }
}
