/// The validated settings of /etc/photolala/photolalad.toml, with every default of
/// shared/spec/config.md. `Config` builds it; everything else only reads it.
public struct Settings: Sendable, Equatable {
    public struct Account: Sendable, Equatable {
        public var apiURL: String = "https://api.photolala.app"
        /// nil means "the hostname", resolved when pairing so a renamed NAS shows its new name.
        public var deviceName: String? = nil
        public init() {}
    }

    public struct Watch: Sendable, Equatable {
        public static let defaultExtensions = [
            "jpg", "jpeg", "heic", "heif", "png", "tif", "tiff", "gif", "webp",
            "dng", "cr2", "cr3", "nef", "arw", "orf", "raf", "rw2", "mov", "mp4",
        ]
        public var folders: [String] = []
        public var extensions: [String] = Watch.defaultExtensions
        public var exclude: [String] = []
        public var settle: Duration = .seconds(5)
        /// nil is "off".
        public var rescanInterval: Duration? = .seconds(6 * 3600)
        public var followSymlinks = false
        public init() {}
    }

    public struct Upload: Sendable, Equatable {
        public var concurrency = 4
        public var multipartThreshold: Int64 = 64 << 20
        public var partSize: Int64 = 16 << 20
        /// Bytes per second; nil is "off".
        public var bandwidthLimit: Int64? = nil
        public var storageClass = "STANDARD"
        /// How often the bucket is listed to learn what is already there (s3-layout.md).
        public var inventoryInterval: Duration = .seconds(24 * 3600)
        public init() {}
    }

    /// `[catalog]`: thumbnails and catalog rows, so the apps show these photos (app-catalog.md).
    public struct Catalog: Sendable, Equatable {
        public var enabled = true
        public var publishInterval: Duration = .seconds(600)
        public var checkInterval: Duration = .seconds(3600)
        public init() {}
    }

    /// `[tls]`: extra CA certificates to trust besides the system's.
    public struct TLS: Sendable, Equatable {
        /// An absolute path to a PEM file; nil when only the system's store is trusted.
        public var caFile: String? = nil
        public init() {}
    }

    /// `[metrics]`: Prometheus metrics over TCP (always on the control socket).
    public struct Metrics: Sendable, Equatable {
        /// Where to listen; nil is "off".
        public var listen: ListenAddress? = nil
        public init() {}
    }

    /// A TCP address to listen on: an IP literal (or `localhost`) and a port.
    public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// `host:port`, `[v6]:port`; nil when it is neither.
        public init?(parsing text: String) {
            let host: Substring
            let port: Substring
            if text.hasPrefix("[") {
                guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
                host = text[text.index(after: text.startIndex)..<close]
                port = text[text.index(close, offsetBy: 2)...]
            } else {
                guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
                host = text[..<colon]
                port = text[text.index(after: colon)...]
            }
            guard !host.isEmpty, let p = Int(port), (1...65535).contains(p), port.allSatisfy(\.isNumber) else { return nil }
            self.host = String(host)
            self.port = p
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    public struct Credentials: Sendable, Equatable {
        public var refreshBeforeExpiry: Duration = .seconds(300)
        public var appleCheckInterval: Duration = .seconds(6 * 3600)
        public init() {}
    }

    public struct Daemon: Sendable, Equatable {
        public var stateDir = "/var/lib/photolala"
        public var socket = "/run/photolala/photolalad.sock"
        public var socketGroup = "photolala"
        public var logLevel: LogLevel = .info
        public init() {}
    }

    public enum LogLevel: String, Sendable, CaseIterable {
        case trace, debug, info, notice, warning, error
    }

    public var account = Account()
    public var watch = Watch()
    public var upload = Upload()
    public var catalog = Catalog()
    public var tls = TLS()
    public var metrics = Metrics()
    public var credentials = Credentials()
    public var daemon = Daemon()

    public init() {}

    public static let defaultPath = "/etc/photolala/photolalad.toml"
    public static let defaultSocket = "/run/photolala/photolalad.sock"
}
