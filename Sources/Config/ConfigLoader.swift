/// Config: reads /etc/photolala/photolalad.toml into validated Settings, reporting every problem with its key.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PhotolalaCore
import TOMLKit

package enum ConfigLoader {
    /// `--config`, then `--instance`'s file, then `$PHOTOLALA_CONFIG`, then `$PHOTOLALA_INSTANCE`'s
    /// file, then /etc/photolala/photolalad.toml (config.md): what is typed beats what the
    /// environment says. `instance` is the one `resolveInstance` chose.
    package static func resolvePath(explicit: String?, instance: Instance? = nil, instanceFromFlag: Bool = true,
                                    environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let instance, instanceFromFlag { return instance.configPath }
        if let env = environment["PHOTOLALA_CONFIG"], !env.isEmpty { return env }
        if let instance { return instance.configPath }
        return Settings.defaultPath
    }

    /// `--instance NAME`, else `$PHOTOLALA_INSTANCE`, else none; a name that cannot be an
    /// instance's is an error that says what a name may be.
    package static func resolveInstance(flag: String?, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(ConfigError) -> (instance: Instance?, fromFlag: Bool)
    {
        let (given, fromFlag, source): (String?, Bool, String) = if let flag { (flag, true, "--instance") } else {
            (environment["PHOTOLALA_INSTANCE"].flatMap { $0.isEmpty ? nil : $0 }, false, "PHOTOLALA_INSTANCE")
        }
        guard let given else { return (nil, fromFlag) }
        if let why = Instance.problem(given) {
            throw ConfigError(path: fromFlag ? "the command line" : "the environment",
                              problems: [.init(key: source, value: "\"\(given)\"", expected: "an instance name: \(why)")])
        }
        return (Instance(given), fromFlag)
    }

    package static func load(path: String, instance: Instance? = nil) throws(ConfigError) -> Settings {
        let text: String
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            guard let s = String(data: data, encoding: .utf8) else {
                throw ConfigError(path: path, problems: [.init(key: "(file)", value: nil, expected: "not UTF-8 text")])
            }
            text = s
        } catch let e as ConfigError {
            throw e
        } catch {
            throw ConfigError(path: path, problems: [.init(key: "(file)", value: nil, expected: Self.unreadableReason(path))])
        }
        return try parse(text, path: path, instance: instance)
    }

    package static func parse(_ text: String, path: String = Settings.defaultPath, instance: Instance? = nil) throws(ConfigError) -> Settings {
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let e as TOMLParseError {
            throw ConfigError(path: path, problems: [.init(
                key: "(syntax)", value: nil,
                expected: "not valid TOML: line \(e.source.begin.line), column \(e.source.begin.column): \(e.description)")])
        } catch {
            throw ConfigError(path: path, problems: [.init(key: "(syntax)", value: nil, expected: "not valid TOML: \(error)")])
        }
        var reader = TableReader()
        let settings = reader.read(table, defaults: Settings(instance: instance))
        if !reader.problems.isEmpty { throw ConfigError(path: path, problems: reader.problems) }
        return settings
    }
}

extension ConfigLoader {
    /// Says why a config file cannot be read, from the kernel's own answer.
    static func unreadableReason(_ path: String) -> String {
        let fd = Glibc.open(path, O_RDONLY)
        let code = errno
        if fd >= 0 {
            Glibc.close(fd)
            return "the file cannot be read"
        }
        switch code {
        case ENOENT, ENOTDIR: return "the file does not exist (create it, or pass --config PATH)"
        case EACCES, EPERM: return "the file cannot be read: permission denied for uid \(getuid()) on the file or a folder above it"
        case EISDIR: return "cannot be read: it is a directory, not a file"
        default: return "the file cannot be read: \(String(cString: strerror(code)))"
        }
    }
}

/// Walks the TOML tree once, collecting problems instead of stopping at the first.
package struct TableReader {
    var problems: [ConfigError.Problem] = []

    private static let sections: [String: Set<String>] = [
        "account": ["api_url", "device_name"],
        "watch": ["folders", "extensions", "exclude", "settle", "rescan_interval", "follow_symlinks"],
        "upload": ["concurrency", "multipart_threshold", "part_size", "bandwidth_limit", "storage_class", "inventory_interval"],
        "catalog": ["enabled", "publish_interval", "check_interval"],
        "tls": ["ca_file"],
        "metrics": ["listen"],
        "web": TableReader.webKeys,
        "notify": ["webhook", "webhook_format", "command", "healthcheck_url", "healthcheck_interval", "repeat", "daily_summary"],
        "audit": ["max_size"],
        "credentials": ["refresh_before_expiry", "apple_check_interval"],
        "daemon": ["state_dir", "socket", "socket_group", "log_level"],
        "mirror": mirrorKeys,
    ]

    static let storageClasses = [
        "STANDARD", "REDUCED_REDUNDANCY", "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING",
        "GLACIER", "GLACIER_IR", "DEEP_ARCHIVE", "EXPRESS_ONEZONE",
    ]

    mutating func read(_ root: TOMLTable, defaults: Settings = Settings()) -> Settings {
        var s = defaults
        for key in root.keys.sorted() {
            guard let allowed = Self.sections[key] else {
                problem(key, nil, "unknown section; known sections are [\(Self.sections.keys.sorted().joined(separator: "], ["))]")
                continue
            }
            guard let table = root[key]?.table else {
                problem(key, render(root[key]), "a table ([\(key)])")
                continue
            }
            for sub in table.keys.sorted() where !allowed.contains(sub) {
                problem("\(key).\(sub)", render(table[sub]), "unknown key (a typo?); [\(key)] knows \(allowed.sorted().joined(separator: ", "))")
            }
        }

        let account = root["account"]?.table
        if let v = account?["api_url"] {
            if let url = string("account.api_url", v) {
                if let message = Self.urlProblem(url, example: "https://api.photolala.app") { problem("account.api_url", quote(url), message) } else { s.account.apiURL = url }
            }
        }
        if let v = account?["device_name"], let name = string("account.device_name", v) {
            if name.isEmpty || name.count > 64 || name.contains(where: { $0.isNewline }) {
                problem("account.device_name", quote(name), "a name of 1 to 64 characters on one line")
            } else { s.account.deviceName = name }
        }

        let watch = root["watch"]?.table
        if let v = watch?["folders"] {
            if let list = strings("watch.folders", v) {
                if list.isEmpty { problem("watch.folders", "[]", "at least one folder to back up, e.g. [\"/srv/photos\"]") }
                for f in list where !f.hasPrefix("/") {
                    problem("watch.folders", quote(f), "an absolute path (starting with /)")
                }
                if list.allSatisfy({ $0.hasPrefix("/") }) {
                    s.watch.folders = list.map(Self.normalizeFolder)
                }
            }
        } else if root["watch"] == nil || watch != nil {
            problem("watch.folders", nil, "is required: the folders to back up, e.g. folders = [\"/srv/photos\"] under [watch]")
        }
        if let v = watch?["extensions"], let list = strings("watch.extensions", v) {
            let cleaned = list.map { ($0.hasPrefix(".") ? String($0.dropFirst()) : $0).lowercased() }
            if cleaned.isEmpty || cleaned.contains(where: { $0.isEmpty || $0.contains("/") }) {
                problem("watch.extensions", render(v), "a non-empty list of file extensions such as [\"jpg\", \"heic\"]")
            } else { s.watch.extensions = cleaned }
        }
        if let v = watch?["exclude"], let list = strings("watch.exclude", v) {
            if list.contains(where: { $0.isEmpty || $0.contains("/") }) {
                problem("watch.exclude", render(v), "name globs without '/' such as [\"*.xmp\", \"Private\"]")
            } else { s.watch.exclude = list }
        }
        if let v = watch?["settle"], let d = duration("watch.settle", v,
                                                      from: .zero, to: .seconds(3600), "a duration of at most 1h") {
            s.watch.settle = d
        }
        if let v = watch?["rescan_interval"] {
            if v.string?.lowercased() == "off" {
                s.watch.rescanInterval = nil
            } else if let d = duration("watch.rescan_interval", v, orOff: true) {
                if d < .seconds(60) { problem("watch.rescan_interval", render(v), "\"off\" or a duration of at least 1m") } else { s.watch.rescanInterval = d }
            }
        }
        if let v = watch?["follow_symlinks"], let b = bool("watch.follow_symlinks", v) { s.watch.followSymlinks = b }

        let upload = root["upload"]?.table
        if let v = upload?["concurrency"] {
            if let n = v.int, (1...64).contains(n) { s.upload.concurrency = n } else { problem("upload.concurrency", render(v), "a whole number from 1 to 64") }
        }
        if let v = upload?["multipart_threshold"], let n = size("upload.multipart_threshold", v,
                                                                from: 5 << 20, to: 5 << 30, "a size from 5MiB to 5GiB (S3's limits for one PUT)") {
            s.upload.multipartThreshold = n
        }
        if let v = upload?["part_size"], let n = size("upload.part_size", v,
                                                      from: 5 << 20, to: 5 << 30, "a size from 5MiB to 5GiB (S3's limits for a part)") {
            s.upload.partSize = n
        }
        if let v = upload?["storage_class"], let c = string("upload.storage_class", v) {
            if Self.storageClasses.contains(c) { s.upload.storageClass = c } else {
                problem("upload.storage_class", quote(c), "one of \(Self.storageClasses.joined(separator: ", "))")
            }
        }

        if let v = upload?["inventory_interval"], let d = duration("upload.inventory_interval", v,
                                                                   from: .seconds(60), to: .seconds(30 * 86400), "a duration from 1m to 30d") {
            s.upload.inventoryInterval = d
        }
        readStageSections(root, into: &s)
        readMirrorSection(root, into: &s)
        readNotifySections(root, into: &s)
        readWebSection(root, into: &s)

        let credentials = root["credentials"]?.table
        if let v = credentials?["refresh_before_expiry"], let d = duration("credentials.refresh_before_expiry", v,
                                                                           from: .nanoseconds(1), to: .seconds(3600),
                                                                           "a duration from 1s to 1h") {
            s.credentials.refreshBeforeExpiry = d
        }
        if let v = credentials?["apple_check_interval"], let d = duration("credentials.apple_check_interval", v,
                                                                          from: .seconds(1), to: .seconds(7 * 86400), "a duration from 1s to 7d") {
            s.credentials.appleCheckInterval = d
        }

        let daemon = root["daemon"]?.table
        if let v = daemon?["state_dir"], let p = string("daemon.state_dir", v) {
            if p.hasPrefix("/") { s.daemon.stateDir = Self.normalizeFolder(p) } else { problem("daemon.state_dir", quote(p), "an absolute path (starting with /)") }
        }
        if let v = daemon?["socket"], let p = string("daemon.socket", v) {
            if !p.hasPrefix("/") { problem("daemon.socket", quote(p), "an absolute path (starting with /)") }
            else if p.utf8.count > 107 { problem("daemon.socket", quote(p), "a path of at most 107 bytes (the limit of a Unix socket address)") }
            else { s.daemon.socket = p }
        }
        if let v = daemon?["socket_group"], let g = string("daemon.socket_group", v) {
            if g.isEmpty || g.contains(where: { $0.isWhitespace || $0 == ":" }) { problem("daemon.socket_group", quote(g), "a group name") } else { s.daemon.socketGroup = g }
        }
        if let v = daemon?["log_level"], let l = string("daemon.log_level", v) {
            if let level = Settings.LogLevel(rawValue: l.lowercased()) { s.daemon.logLevel = level } else {
                problem("daemon.log_level", quote(l), "one of \(Settings.LogLevel.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        }
        checkMirrorPlace(s)
        return s
    }

    // MARK: `[catalog]`, `[tls]` and `[metrics]`: the sections of the stages that came after the upload pipeline (config.md).

    mutating func readStageSections(_ root: TOMLTable, into s: inout Settings) {
        let catalog = root["catalog"]?.table
        if let v = catalog?["enabled"], let b = bool("catalog.enabled", v) { s.catalog.enabled = b }
        if let v = catalog?["publish_interval"], let d = duration("catalog.publish_interval", v,
                                                                  from: .seconds(1), to: .seconds(86400), "a duration from 1s to 1d") {
            s.catalog.publishInterval = d
        }
        if let v = catalog?["check_interval"], let d = duration("catalog.check_interval", v,
                                                                from: .seconds(10), to: .seconds(7 * 86400), "a duration from 10s to 7d") {
            s.catalog.checkInterval = d
        }

        if let v = root["tls"]?.table?["ca_file"], let path = string("tls.ca_file", v), !path.isEmpty {
            if let why = Self.caFileProblem(path) { problem("tls.ca_file", quote(path), why) } else { s.tls.caFile = path }
        }

        if let v = root["metrics"]?.table?["listen"], let text = string("metrics.listen", v) {
            if text.lowercased() == "off" || text.isEmpty {
                s.metrics.listen = nil
            } else if let address = Settings.ListenAddress(parsing: text) {
                s.metrics.listen = address
            } else {
                problem("metrics.listen", quote(text), "\"off\" or an address and port such as \"127.0.0.1:9469\" or \"[::1]:9469\"")
            }
        }
    }

    /// nil when `path` is a readable file holding at least one PEM certificate.
    static func caFileProblem(_ path: String) -> String? {
        guard path.hasPrefix("/") else { return "an absolute path to a PEM file of CA certificates (or \"\" for none)" }
        guard let data = FileManager.default.contents(atPath: path) else {
            return "a readable PEM file of CA certificates: \(ConfigLoader.unreadableReason(path))"
        }
        guard String(decoding: data, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") else {
            return "a PEM file of CA certificates (no \"-----BEGIN CERTIFICATE-----\" in it)"
        }
        return nil
    }

    // MARK: `[notify]`, `[audit]` and `upload.bandwidth_limit` (a rate or a timetable): config.md "Notifications" and "Bandwidth timetable".

    mutating func readNotifySections(_ root: TOMLTable, into s: inout Settings) {
        if let v = root["upload"]?.table?["bandwidth_limit"] { readBandwidth(v, into: &s.upload) }

        let notify = root["notify"]?.table
        if let v = notify?["webhook"], let url = string("notify.webhook", v), !url.isEmpty {
            if let why = Self.urlProblem(url, example: "https://ntfy.sh/my-nas", optional: true) { problem("notify.webhook", quote(url), why) } else {
                s.notify.webhook = url
            }
        }
        if let v = notify?["webhook_format"], let f = string("notify.webhook_format", v) {
            if let format = Settings.Notify.WebhookFormat(rawValue: f.lowercased()) { s.notify.webhookFormat = format } else {
                problem("notify.webhook_format", quote(f), "one of \(Settings.Notify.WebhookFormat.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        }
        if let v = notify?["command"], let path = string("notify.command", v), !path.isEmpty {
            if let why = Self.commandProblem(path) { problem("notify.command", quote(path), why) } else { s.notify.command = path }
        }
        if let v = notify?["healthcheck_url"], let url = string("notify.healthcheck_url", v), !url.isEmpty {
            if let why = Self.urlProblem(url, example: "https://hc-ping.com/your-uuid", optional: true) { problem("notify.healthcheck_url", quote(url), why) } else {
                s.notify.healthcheckURL = url
            }
        }
        if let v = notify?["healthcheck_interval"], let d = duration("notify.healthcheck_interval", v,
                                                                     from: .seconds(1), to: .seconds(86400), "a duration from 1s to 1d") {
            s.notify.healthcheckInterval = d
        }
        if let v = notify?["repeat"], let d = duration("notify.repeat", v,
                                                       from: .seconds(1), to: .seconds(30 * 86400), "a duration from 1s to 30d") {
            s.notify.repeatInterval = d
        }
        if let v = notify?["daily_summary"], let b = bool("notify.daily_summary", v) { s.notify.dailySummary = b }

        if let v = root["audit"]?.table?["max_size"], let n = size("audit.max_size", v,
                                                                   from: 64 << 10, to: 1 << 30, "a size from 64KiB to 1GiB") {
            s.audit.maxSize = n
        }
    }

    /// A rate (`"off"`, `"10MiB/s"`) or a timetable (`"08:00,2MiB/s 18:00,0 23:00,off"`);
    /// a bad timetable entry is named with what was expected of it.
    mutating func readBandwidth(_ v: TOMLValueConvertible, into upload: inout Settings.Upload) {
        guard let text = v.string else {
            problem("upload.bandwidth_limit", render(v), "\"off\", a size per second such as \"10MiB/s\", or a timetable such as \"08:00,2MiB/s 18:00,0 23:00,off\"")
            return
        }
        if BandwidthTimetable.looksLikeTimetable(text) {
            do {
                upload.bandwidthTimetable = try BandwidthTimetable.parse(text)
                upload.bandwidthLimit = nil
            } catch {
                problem("upload.bandwidth_limit", quote(text), "a timetable of entries \"HH:MM,RATE\" or \"Mon-HH:MM,RATE\"; "
                        + "in the entry \"\(error.entry)\": \(error.expected)")
            }
        } else if let rate = Units.parseRate(text) {
            upload.bandwidthLimit = rate
            upload.bandwidthTimetable = nil
        } else {
            let zero = text.trimmingCharacters(in: .whitespaces) == "0"
            problem("upload.bandwidth_limit", quote(text), "\"off\" or a size per second such as \"10MiB/s\""
                    + (zero ? " (0 pauses only within a timetable, e.g. \"18:00,0 23:00,off\"; `photolalactl pause` pauses now)"
                        : ", or a timetable such as \"08:00,2MiB/s 18:00,0 23:00,off\""))
        }
    }

    /// nil when acceptable: https, or plain http to a loopback host (127.0.0.0/8, ::1,
    /// localhost: a test receiver, a local ntfy or backend), never http across a network,
    /// where the URL's tokens would travel in clear. `optional`: "" means none.
    package static func urlProblem(_ text: String, example: String, optional: Bool = false) -> String? {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            return "an absolute URL such as \"\(example)\"" + (optional ? " (or \"\" for none)" : "")
        }
        switch scheme {
        case "https": return nil
        case "http":
            let h = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
            if h == "localhost" || h == "::1" || h.hasPrefix("127.") { return nil }
            return "an https:// URL (plain http is allowed only for loopback hosts: 127.0.0.0/8, ::1, localhost)"
        default:
            return "an https:// URL such as \"\(example)\""
        }
    }

    /// nil when `path` is an absolute path to a file this user may execute.
    static func commandProblem(_ path: String) -> String? {
        guard path.hasPrefix("/") else { return "an absolute path to a program (or \"\" for none), such as \"/usr/local/bin/photolala-notify\"" }
        var st = stat()
        guard stat(path, &st) == 0 else {
            return "an executable file: \(String(cString: strerror(errno))) (the daemon's user must be able to reach it)"
        }
        if (st.st_mode & S_IFMT) == S_IFDIR { return "an executable file, not a directory" }
        guard access(path, X_OK) == 0 else { return "an executable file: uid \(getuid()) may not execute it (chmod +x?)" }
        return nil
    }

    static func normalizeFolder(_ p: String) -> String {
        var p = p
        while p.count > 1 && p.hasSuffix("/") { p.removeLast() }
        return p
    }


    // MARK: typed readers: each records a problem and returns nil on a mismatch

    mutating func problem(_ key: String, _ value: String?, _ expected: String) {
        problems.append(.init(key: key, value: value, expected: expected))
    }

    mutating func string(_ key: String, _ v: TOMLValueConvertible) -> String? {
        if let s = v.string { return s }
        problem(key, render(v), "a string")
        return nil
    }

    mutating func bool(_ key: String, _ v: TOMLValueConvertible) -> Bool? {
        if let b = v.bool { return b }
        problem(key, render(v), "true or false")
        return nil
    }

    mutating func strings(_ key: String, _ v: TOMLValueConvertible) -> [String]? {
        guard let array = v.array else {
            problem(key, render(v), "a list of strings such as [\"a\", \"b\"]")
            return nil
        }
        var out: [String] = []
        for element in array {
            guard let s = element.string else {
                problem(key, render(v), "a list of strings such as [\"a\", \"b\"]")
                return nil
            }
            out.append(s)
        }
        return out
    }

    mutating func duration(_ key: String, _ v: TOMLValueConvertible, orOff: Bool = false) -> Duration? {
        let expected = (orOff ? "\"off\", " : "") + "a number of seconds or a duration such as \"90s\", \"15m\", \"6h\""
        if let n = v.int, n >= 0 { return .seconds(n) }
        if let d = v.double, d >= 0, d.isFinite { return .milliseconds(Int64(d * 1000)) }
        if let s = v.string, let d = Units.parseDuration(s) { return d }
        problem(key, render(v), expected)
        return nil
    }

    /// A duration from `lower` to `upper`; anything else is a problem saying `expected`.
    mutating func duration(_ key: String, _ v: TOMLValueConvertible, from lower: Duration, to upper: Duration,
                           _ expected: String) -> Duration? {
        guard let d = duration(key, v) else { return nil }
        guard d >= lower, d <= upper else {
            problem(key, render(v), expected)
            return nil
        }
        return d
    }

    /// A size from `lower` to `upper`; anything else is a problem saying `expected`.
    mutating func size(_ key: String, _ v: TOMLValueConvertible, from lower: Int64, to upper: Int64, _ expected: String) -> Int64? {
        guard let n = size(key, v) else { return nil }
        guard n >= lower, n <= upper else {
            problem(key, render(v), expected)
            return nil
        }
        return n
    }

    mutating func size(_ key: String, _ v: TOMLValueConvertible) -> Int64? {
        if let n = v.int, n >= 0 { return Int64(n) }
        if let s = v.string, let n = Units.parseSize(s) { return n }
        problem(key, render(v), "a number of bytes or a size such as \"16MiB\", \"1GiB\"")
        return nil
    }

    func quote(_ s: String) -> String {
        "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    func render(_ v: TOMLValueConvertible?) -> String {
        guard let v else { return "(missing)" }
        if let s = v.string { return quote(s) }
        if let a = v.array { return "[" + a.map { render($0) }.joined(separator: ", ") + "]" }
        if v.table != nil { return "(a table)" }
        return v.debugDescription
    }
}

extension ConfigLoader {
    /// What photolalactl needs from the config — the socket and its group — read leniently:
    /// a CLI must still find the daemon when an unrelated key is wrong.
    package static func controlSettings(path: String) -> (socket: String?, group: String?) {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8),
              let table = try? TOMLTable(string: text), let daemon = table["daemon"]?.table
        else { return (nil, nil) }
        return (daemon["socket"]?.string, daemon["socket_group"]?.string)
    }
}
