/// The validated settings of /etc/photolala/photolalad.toml, with every default of
/// shared/spec/config.md. `Config` builds it; everything else only reads it.
package struct Settings: Sendable, Equatable {
    package struct Account: Sendable, Equatable {
        package var apiURL: String = "https://api.photolala.app"
        /// nil means "the hostname", resolved when pairing so a renamed NAS shows its new name.
        package var deviceName: String? = nil
        package init() {}
    }

    package struct Watch: Sendable, Equatable {
        package static let defaultExtensions = [
            "jpg", "jpeg", "heic", "heif", "png", "tif", "tiff", "gif", "webp",
            "dng", "cr2", "cr3", "nef", "arw", "orf", "raf", "rw2", "mov", "mp4",
        ]
        package var folders: [String] = []
        package var extensions: [String] = Watch.defaultExtensions
        package var exclude: [String] = []
        package var settle: Duration = .seconds(5)
        /// nil is "off".
        package var rescanInterval: Duration? = .seconds(6 * 3600)
        package var followSymlinks = false
        package init() {}
    }

    package struct Upload: Sendable, Equatable {
        package var concurrency = 4
        package var multipartThreshold: Int64 = 64 << 20
        package var partSize: Int64 = 16 << 20
        /// Bytes per second; nil is "off", and also when a timetable sets the rate instead.
        package var bandwidthLimit: Int64? = nil
        /// `bandwidth_limit` given as a timetable (config.md "Bandwidth timetable"); nil for one rate.
        package var bandwidthTimetable: BandwidthTimetable? = nil
        package var storageClass = "STANDARD"
        /// How often the bucket is listed to learn what is already there (s3-layout.md).
        package var inventoryInterval: Duration = .seconds(24 * 3600)
        package init() {}
    }

    /// `[catalog]`: thumbnails and catalog rows, so the apps show these photos (app-catalog.md).
    package struct Catalog: Sendable, Equatable {
        package var enabled = true
        package var publishInterval: Duration = .seconds(600)
        package var checkInterval: Duration = .seconds(3600)
        package init() {}
    }

    /// `[tls]`: extra CA certificates to trust besides the system's.
    package struct TLS: Sendable, Equatable {
        /// An absolute path to a PEM file; nil when only the system's store is trusted.
        package var caFile: String? = nil
        package init() {}
    }

    /// `[metrics]`: Prometheus metrics over TCP (always on the control socket).
    package struct Metrics: Sendable, Equatable {
        /// Where to listen; nil is "off".
        package var listen: ListenAddress? = nil
        package init() {}
    }

    /// `[web]`: the status page (web.md).
    package struct Web: Sendable, Equatable {
        package static let defaultListen = ListenAddress(host: "127.0.0.1", port: 8770)
        /// Where the page is served; nil is "off".
        package var listen: ListenAddress? = Web.defaultListen
        /// Whether `listen` was written in the config (only then is an address that cannot
        /// be bound an "Action needed" item; the default's failure is shown, not pressed).
        package var listenSet = false
        /// Extra `Host` names the page answers to (`nas.local`), with or without a port.
        package var hosts: [String] = []
        /// PEM files; both set, or neither.
        package var tlsCert: String? = nil
        package var tlsKey: String? = nil
        package var allowPlainHTTP = false
        package var sessionTTL: Duration = .seconds(12 * 3600)
        package init() {}

        package var tls: Bool { tlsCert != nil && tlsKey != nil }

        /// Whether `listen` was written does not change what is served: `--check-config`'s
        /// output (every key written) reads back as the same settings.
        package static func == (a: Web, b: Web) -> Bool {
            (a.listen, a.hosts, a.tlsCert, a.tlsKey, a.allowPlainHTTP, a.sessionTTL)
                == (b.listen, b.hosts, b.tlsCert, b.tlsKey, b.allowPlainHTTP, b.sessionTTL)
        }
    }

    /// A TCP address to listen on: an IP literal (or `localhost`) and a port.
    package struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
        package var host: String
        package var port: Int
        package init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// `host:port`, `[v6]:port`; nil when it is neither.
        package init?(parsing text: String) {
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

        package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        /// Only this machine can reach it: 127.0.0.0/8, ::1 or `localhost`.
        package var isLoopback: Bool {
            host == "localhost" || host == "::1" || host.hasPrefix("127.")
        }
    }

    /// `[notify]`: telling the owner when backups stop (config.md "Notifications").
    package struct Notify: Sendable, Equatable {
        package enum WebhookFormat: String, Sendable, CaseIterable {
            /// The event object of config.md.
            case json
            /// ntfy's: the message as a text body, Title/Priority/Tags headers.
            case ntfy
            /// `{"text": …}`: Slack, Discord's /slack and Mattermost.
            case slack
        }
        /// An https URL (http only on loopback); nil is none.
        package var webhook: String? = nil
        package var webhookFormat: WebhookFormat = .json
        /// An absolute path run for each event; nil is none.
        package var command: String? = nil
        /// A Healthchecks-style ping URL; nil is none.
        package var healthcheckURL: String? = nil
        package var healthcheckInterval: Duration = .seconds(3600)
        package var repeatInterval: Duration = .seconds(24 * 3600)
        package var dailySummary = false
        package init() {}

        /// Whether any channel is configured (nothing is decided, written or sent otherwise).
        package var hasChannels: Bool { webhook != nil || command != nil || healthcheckURL != nil }
    }

    /// `[audit]`: the audit trail (cli.md "audit").
    package struct Audit: Sendable, Equatable {
        /// The trail is rotated at this size; two old files are kept.
        package var maxSize: Int64 = 8 << 20
        package init() {}
    }

    /// `[mirror]`: the NAS's own copy of every photo of the account (mirror.md).
    package struct Mirror: Sendable, Equatable {
        /// Which objects are copied down.
        package enum Include: String, Sendable, CaseIterable {
            /// Objects whose MD5 no watched file of this NAS has (outside the mirror folder).
            case others
            /// Every object of the account.
            case all
        }
        /// What becomes of a copy whose object the account no longer holds.
        package enum OnCloudDelete: String, Sendable, CaseIterable {
            /// It stays where it is, counted as "only on this NAS".
            case keep
            /// It is moved into `folder/.trash/`, at the same relative path (never deleted).
            case trash
        }
        /// `min_free`: a size, or a share of the folder's filesystem.
        package enum FreeSpace: Sendable, Equatable, CustomStringConvertible {
            case bytes(Int64)
            /// Percent, 0–100.
            case percent(Double)

            package var description: String {
                switch self {
                case .bytes(let n): Units.formatSize(n)
                case .percent(let p): p == p.rounded() ? "\(Int(p))%" : "\(p)%"
                }
            }

            /// The bytes this leaves free on a filesystem of `total` bytes.
            package func bytes(ofTotal total: Int64) -> Int64 {
                switch self {
                case .bytes(let n): n
                case .percent(let p): Int64((Double(total) * p / 100).rounded(.up))
                }
            }
        }
        /// Who owns what the mirror writes (`owner = "user:group"`); nil parts stay the daemon's.
        package struct Owner: Sendable, Equatable, CustomStringConvertible {
            package var user: String?
            package var group: String?
            package init(user: String?, group: String?) {
                self.user = user
                self.group = group
            }
            package var description: String { (user ?? "") + ":" + (group ?? "") }
        }

        /// An absolute path; nil when the mirror is off.
        package var folder: String? = nil
        package var include: Include = .others
        package var onCloudDelete: OnCloudDelete = .keep
        package var minFree: FreeSpace = .percent(5)
        /// Bytes per second; nil is "off".
        package var downloadLimit: Int64? = nil
        package var thawArchived = false
        /// nil: the daemon's user and group.
        package var owner: Owner? = nil
        package var fileMode: UInt32 = 0o640
        package var dirMode: UInt32 = 0o750
        package var checkInterval: Duration = .seconds(15 * 60)
        package var listInterval: Duration = .seconds(24 * 3600)
        package init() {}
    }

    package struct Credentials: Sendable, Equatable {
        package var refreshBeforeExpiry: Duration = .seconds(300)
        package var appleCheckInterval: Duration = .seconds(6 * 3600)
        package init() {}
    }

    package struct Daemon: Sendable, Equatable {
        package var stateDir = "/var/lib/photolala"
        package var socket = "/run/photolala/photolalad.sock"
        package var socketGroup = "photolala"
        package var logLevel: LogLevel = .info
        package init() {}
    }

    package enum LogLevel: String, Sendable, CaseIterable {
        case trace, debug, info, notice, warning, error
    }

    package var account = Account()
    package var watch = Watch()
    package var upload = Upload()
    package var catalog = Catalog()
    package var tls = TLS()
    package var metrics = Metrics()
    package var web = Web()
    package var notify = Notify()
    package var audit = Audit()
    package var mirror = Mirror()
    package var credentials = Credentials()
    package var daemon = Daemon()
    /// Which instance these settings are for (config.md "Instances"); nil: photolalad.service.
    /// Not a key of the file: `--instance` or `$PHOTOLALA_INSTANCE` says it.
    package var instance: Instance? = nil

    package init() {}

    package static let defaultPath = "/etc/photolala/photolalad.toml"
    package static let defaultSocket = "/run/photolala/photolalad.sock"
}
