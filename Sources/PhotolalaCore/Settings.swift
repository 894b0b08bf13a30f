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
        public init() {}
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
    public var credentials = Credentials()
    public var daemon = Daemon()

    public init() {}

    public static let defaultPath = "/etc/photolala/photolalad.toml"
    public static let defaultSocket = "/run/photolala/photolalad.sock"
}
