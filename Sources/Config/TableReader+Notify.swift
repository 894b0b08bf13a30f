#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PhotolalaCore
import TOMLKit

/// `[notify]`, `[audit]` and `upload.bandwidth_limit` (a rate or a timetable): config.md
/// "Notifications" and "Bandwidth timetable".
extension TableReader {
    mutating func readNotifySections(_ root: TOMLTable, into s: inout Settings) {
        if let v = root["upload"]?.table?["bandwidth_limit"] { readBandwidth(v, into: &s.upload) }

        let notify = root["notify"]?.table
        if let v = notify?["webhook"], let url = string("notify.webhook", v), !url.isEmpty {
            if let why = Self.notifyURLProblem(url, example: "https://ntfy.sh/my-nas") { problem("notify.webhook", quote(url), why) } else {
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
            if let why = Self.notifyURLProblem(url, example: "https://hc-ping.com/your-uuid") { problem("notify.healthcheck_url", quote(url), why) } else {
                s.notify.healthcheckURL = url
            }
        }
        if let v = notify?["healthcheck_interval"], let d = duration("notify.healthcheck_interval", v) {
            if d < .seconds(1) || d > .seconds(86400) { problem("notify.healthcheck_interval", render(v), "a duration from 1s to 1d") } else { s.notify.healthcheckInterval = d }
        }
        if let v = notify?["repeat"], let d = duration("notify.repeat", v) {
            if d < .seconds(1) || d > .seconds(30 * 86400) { problem("notify.repeat", render(v), "a duration from 1s to 30d") } else { s.notify.repeatInterval = d }
        }
        if let v = notify?["daily_summary"], let b = bool("notify.daily_summary", v) { s.notify.dailySummary = b }

        if let v = root["audit"]?.table?["max_size"], let n = size("audit.max_size", v) {
            if n < 64 << 10 || n > 1 << 30 { problem("audit.max_size", render(v), "a size from 64KiB to 1GiB") } else { s.audit.maxSize = n }
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

    /// nil when acceptable: https, or plain http to a loopback host (a test receiver, a
    /// local ntfy), never http across a network, where the URL's token would travel in clear.
    static func notifyURLProblem(_ text: String, example: String) -> String? {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            return "an absolute URL such as \"\(example)\" (or \"\" for none)"
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
}
