import Foundation

/// An HTTP proxy every S3 connection goes through (`CONNECT host:443` for https). Only a
/// debug build reads one, from `PHOTOLALAD_DEBUG_S3_PROXY=host:port`: the end-to-end
/// tests use it to send the daemon's AWS-style virtual-hosted requests
/// (`bucket.s3.region.amazonaws.com`) to a local RADOS Gateway without touching
/// /etc/hosts. A release build (the package) has no such setting at all.
package struct ConnectProxy: Sendable, Equatable {
    package var host: String
    package var port: Int

    package init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `host:port` (IPv4 or a name); nil for anything else.
    package init?(parsing text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
              (1...65535).contains(port), colon > text.startIndex else { return nil }
        self.init(host: String(text[..<colon]), port: port)
    }

    package static let debugVariable = "PHOTOLALAD_DEBUG_S3_PROXY"

    /// The proxy a debug build was told to use; always nil in a release build.
    package static var debugOverride: ConnectProxy? {
        #if DEBUG
        return ProcessInfo.processInfo.environment[debugVariable].flatMap(ConnectProxy.init(parsing:))
        #else
        return nil
        #endif
    }
}
