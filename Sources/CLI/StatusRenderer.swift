import Foundation
import PhotolalaCore

/// The human `photolalactl status`: one screen answering "is my stuff backed up?".
package enum StatusRenderer {
    package static func human(_ s: DaemonStatus, color: Bool, now: Date = Date()) -> String {
        func bold(_ t: String) -> String { color ? "\u{1B}[1m\(t)\u{1B}[0m" : t }
        func tint(_ t: String, _ code: String) -> String { color ? "\u{1B}[\(code)m\(t)\u{1B}[0m" : t }
        var out: [String] = []
        let headline = StatusSummary.oneLine(s)
        let mark: String
        switch s.state {
        case .running: mark = s.queue.failed > 0 ? tint("!", "33") : tint("●", "32")
        case .paused, .needsLogin: mark = tint("‖", "33")
        case .starting, .stopping: mark = "…"
        }
        out.append("\(mark) \(bold(headline))")
        if let p = s.pairing {
            out.append("  Pairing in progress: on your phone open \(p.verificationUriComplete ?? p.verificationUri) and confirm the code \(bold(p.userCode))" + (p.expiresAt.map { " (expires \($0))" } ?? ""))
        } else if s.state == .needsLogin && !s.attention.contains(where: { $0.reason == .notSignedIn }) {
            out.append("  Not signed in yet: run `\(s.ctl) login` and confirm on your phone to start backing up.")
        }
        // "Action needed" is the daemon's attention list, exactly: what notifications tell too.
        for item in s.attention {
            out.append("  \(tint("Action needed:", item.severity == .critical ? "31" : "33")) \(item.sentence)")
        }
        if let reason = s.pauseReason, !s.attention.contains(where: { $0.reason.rawValue == reason.rawValue }) {
            out.append("  \(reason.explanation)")
            if reason == .schedule, let until = s.bandwidth.until.flatMap(Timestamp.parse) {
                out.append("  Uploads resume at \(localTime(until, now: now)) (in \(duration(until.timeIntervalSince(now))))"
                           + (s.bandwidth.nextLimit.map { ", at \(Units.humanBytes($0))/s" } ?? "") + ".")
            }
        }
        // A problem the attention list already says (in its own words around it) is not repeated.
        let shown = s.attention.map { $0.message.lowercased() }
        for p in s.problems {
            let said = p.lowercased()
            let tail = said.hasPrefix("disk full") ? String(said.dropFirst("disk full".count)) : said
            if shown.contains(where: { $0.hasSuffix(tail) }) { continue }
            out.append("  \(tint("Problem:", "31")) \(p)")
        }
        out.append("")

        let q = s.queue
        let total = q.pending + q.hashing + q.uploading + q.uploaded
        out.append("Files      \(q.uploaded) backed up (\(Units.humanBytes(q.uploadedBytes))), \(q.pending) waiting, \(q.hashing) reading, \(q.uploading) uploading, \(q.failed) failed")
        if q.pending + q.hashing + q.uploading > 0 {
            let fraction = total > 0 ? Double(q.uploaded) / Double(total) : 0
            var line = "Progress   \(bar(fraction, width: 30)) \(Int((fraction * 100).rounded(.down)))%"
            if q.uploadRate > 0 { line += "  \(Units.humanBytes(Int64(q.uploadRate)))/s" }
            if let eta = q.etaSeconds { line += "  ETA \(duration(eta))" }
            out.append(line)
            out.append("To send    \(Units.humanBytes(q.pendingBytes))" + (q.hashRate > 0 && q.hashing > 0 ? ", reading at \(Units.humanBytes(Int64(q.hashRate)))/s" : ""))
        }
        if q.failed > 0 {
            out.append("           see `\(s.ctl) queue --failed`; `\(s.ctl) retry` tries them again")
        }
        out += catalog(s.catalog).map { $0.hasPrefix("!") ? tint(String($0.dropFirst()), "33") : $0 }
        out.append("")
        out.append("Account    " + (s.account.signedIn ? "signed in as \(s.account.userId ?? "?")" : "not signed in"))
        var apple = "Apple ID   \(s.appleCredential.state.rawValue)"
        if let at = s.appleCredential.checkedAt { apple += ", checked \(at)" }
        if let next = s.appleCredential.nextCheckAt { apple += ", next \(next)" }
        if let e = s.appleCredential.lastError { apple += " (last check failed: \(e))" }
        out.append(apple)
        var creds = "Storage    credentials \(s.credentials.state.rawValue)"
        if let exp = s.credentials.expiresAt { creds += ", expire \(exp)" }
        if let e = s.credentials.lastError { creds += " (\(e))" }
        out.append(creds)
        if let h = s.s3, h.state == .backoff {
            var line = "S3         retrying after \(h.failures) failed attempt\(h.failures == 1 ? "" : "s")"
            if let since = h.since { line += " since \(since)" }
            if let next = h.nextAttemptAt.flatMap(Timestamp.parse) {
                let wait = next.timeIntervalSince(now)
                line += wait > 0.5 ? "; every upload waits, next try in \(duration(wait))" : "; trying again now"
            }
            out.append(tint(line, "33"))
            if let e = h.lastError { out.append("           last error: \(e)") }
        }
        if s.account.signedIn { out += inventoryLines(s, tint: tint) }
        out += bandwidthAndNotifyLines(s, now: now, tint: tint)
        if let line = recoveryLine(s.recovery) { out.append(line) }
        if let m = s.manifest, m.state != .off {
            var line = "Manifest   \(m.files) files (\(Units.humanBytes(m.bytes))) listed in the bucket, segment \(m.segments)"
            switch m.state {
            case .pending: line += "; changes waiting to be written"
            case .writing: line += "; writing"
            case .backoff: line += "; writing failed, retrying" + (m.lastError.map { ": \($0)" } ?? "")
            case .waitingForKey: line += "; changes wait for this account's recovery key (sudo photolalactl recovery-key --enter)"
            default: break
            }
            if m.format == 1 { line += "; still in plaintext, to be encrypted" }
            out.append(line)
        }
        if let line = mirrorLine(s.mirror) { out.append(line) }
        if let r = s.restore {
            var line = "Restore    from \(r.device): \(r.filesDone)/\(r.filesTotal) files, \(Units.humanBytes(r.bytesDone))/\(Units.humanBytes(r.bytesTotal))"
            if r.rate > 0 { line += ", \(Units.humanBytes(Int64(r.rate)))/s" }
            if let eta = r.etaSeconds { line += ", ETA \(duration(eta))" }
            out.append(line)
            if r.waitingArchived > 0, let c = r.archiveClass {
                out.append("           \(r.waitingArchived) waiting in \(c), asked back from the archive (\(r.archiveWait ?? "it can take hours"))")
            }
        }
        out.append("")
        out.append("Watching   \(s.watch.folders) folder\(s.watch.folders == 1 ? "" : "s"), \(s.watch.directories) directories" + (s.watch.scanning ? " (scanning)" : ""))
        for p in s.watch.paths {
            let missing = s.watch.missingFolders.contains(p)
            out.append("           \(p)" + (missing ? tint("  — missing or unreadable (retrying)", "31") : ""))
        }
        if s.watch.watchLimitReached {
            out.append("           \(tint("inotify watch limit reached", "33")) (fs.inotify.max_user_watches = \(s.watch.maxUserWatches.map(String.init) ?? "?")): \(s.watch.unwatchedDirectories) directories are rescanned periodically instead")
        }
        out.append("")
        out.append("photolalad \(s.version), state \(s.state.rawValue)" + (s.startedAt.map { ", up since \($0)" } ?? ""))
        return out.joined(separator: "\n") + "\n"
    }

    /// The mirror in one line (mirror.md): "Mirror: 40,210 of 40,222 photos on this NAS, 12
    /// coming (46 MB)", with what stands out after it.
    static func mirrorLine(_ m: DaemonStatus.Mirror) -> String? {
        guard m.state != .off else { return nil }
        func n(_ v: Int) -> String { v.formatted(.number.grouping(.automatic).locale(Locale(identifier: "en_US"))) }
        var line = "Mirror: \(n(m.present)) of \(n(m.present + m.pending)) photo\(m.present + m.pending == 1 ? "" : "s") on this NAS"
        if m.pending > 0 { line += ", \(n(m.pending)) coming (\(Units.humanBytes(m.pendingBytes)))" }
        var notes: [String] = []
        if m.state == .paused, let reason = m.pauseReason {
            let why: String = switch reason {
            case .account: "the account (sign-in, Apple ID)"
            case .user: "paused by you (photolalactl resume)"
            case .schedule: "the bandwidth timetable"
            case .folder: m.lastError ?? "its folder is missing or not writable"
            case .diskFull: "less free space than mirror.min_free in \(m.folder ?? "its folder")"
            }
            notes.append("waiting: " + why)
        }
        if m.archived > 0 { notes.append("\(n(m.archived)) in an archive class" + (m.thawing > 0 ? " (\(n(m.thawing)) asked back)" : "")) }
        if m.onlyHere > 0 { notes.append("\(n(m.onlyHere)) only on this NAS") }
        if m.removedHere > 0 { notes.append("\(n(m.removedHere)) removed here") }
        if m.refused > 0 { notes.append("\(n(m.refused)) refused") }
        if !notes.isEmpty { line += "; " + notes.joined(separator: ", ") }
        return line
    }

    /// Whether this NAS holds the account key; what needs the user is in "Action needed".
    static func recoveryLine(_ r: DaemonStatus.Recovery) -> String? {
        switch r.state {
        case .none: return nil
        case .checking: return "Keys       checking the bucket for this account's key" + (r.lastError.map { " (\($0))" } ?? "")
        case .ready:
            return "Keys       account key \(r.fingerprint ?? "?")"
                + (r.outdated ? "; this NAS's recovery key is outdated (replaced on another NAS)" : "; recovery key: photolalactl recovery-key")
        case .needed: return "Keys       this account's recovery key is needed: sudo photolalactl recovery-key --enter"
        case .unreadable: return "Keys       the account's key object cannot be used (see Action needed)"
        }
    }

    /// What the bucket is known to hold, how uploads learn it, and the last verify.
    package static func inventoryLines(_ s: DaemonStatus, tint: (String, String) -> String) -> [String] {
        let i = s.inventory
        var out: [String] = []
        switch i.state {
        case .notListed:
            out.append("Bucket     not listed yet")
        case .listing:
            out.append("Bucket     listing: \(i.seen) objects so far" + (i.listedAt.map { " (last complete listing \($0))" } ?? ""))
        case .ok:
            // The count is the last listing's: said so, since uploads since then are not in it.
            out.append("Bucket     \(i.objects) objects at the last listing, \(i.listedAt ?? "?")" + (i.nextListingAt.map { "; next \($0)" } ?? ""))
        case .refused:
            out.append(tint("Bucket     listing refused (403): uploads ask S3 about each object with a HEAD", "33"))
        case .failed:
            out.append(tint("Bucket     the last listing failed; trying again" + (i.nextListingAt.map { " at \($0)" } ?? ""), "33"))
        }
        if i.state == .failed || i.state == .refused, let e = i.lastError { out.append("           \(e)") }
        if i.uploadsCheck == .waiting { out.append("           uploads wait for the first listing (so nothing already there is sent)") }
        let v = s.verify
        if v.running {
            out.append("Verify     under way (`photolalactl verify` shows its progress)")
        } else if let at = v.checkedAt {
            var line = "Verified   \(at): \(v.checked) checked, \(v.missing) missing, \(v.mismatched) with other bytes or size"
            if v.deepPercent != nil { line += ", \(v.readBack) read back" }
            out.append(v.missing + v.mismatched > 0 ? tint(line, "33") : line)
            if v.sseKms { out.append("           SSE-KMS bucket: ETags prove nothing; `photolalactl verify --deep 100` reads every object back") }
            if let e = v.lastError { out.append("           \(e)") }
        }
        return out
    }

    /// How many of this NAS's photos the Photolala apps show (their catalog), and why
    /// more do not yet. A line starting with "!" is a warning.
    static func catalog(_ c: DaemonStatus.Catalog) -> [String] {
        func photos(_ n: Int) -> String { n == 1 ? "1 photo" : "\(n) photos" }
        let shown = "\(photos(c.rows)) from this NAS in the Photolala apps"
        let others = c.total > c.rows ? " (\(c.total) in your catalog from all your devices)" : ""
        var lines: [String]
        switch c.state {
        case .off:
            return ["Apps       catalog off (catalog.enabled = false): the Photolala apps do not show photos from this NAS"]
        case .idle:
            lines = ["Apps       no photos from this NAS in the Photolala apps yet" + others]
        case .pending:
            lines = ["Apps       \(shown)\(others); \(c.pending) more at the next publish"]
        case .publishing:
            lines = ["Apps       \(shown); publishing \(c.pending) more now"]
        case .published:
            lines = ["Apps       \(shown)\(others)" + (c.publishedAt.map { ", published \($0)" } ?? "")]
        case .blocked:
            lines = ["Apps       \(shown); \(c.pending) more wait", "!           the catalog cannot be read: \(c.lastError ?? "see the log")"]
        }
        if c.state != .blocked, let e = c.lastError { lines.append("!           last attempt failed: \(e)") }
        if !c.conditionalWrites {
            lines.append("           the store ignores conditional writes: the catalog pointer is written and read back")
        }
        return lines
    }

    /// The upload rate in force (a timetable's slot and when it ends), and the notification
    /// channels with how their deliveries go.
    static func bandwidthAndNotifyLines(_ s: DaemonStatus, now: Date, tint: (String, String) -> String) -> [String] {
        var out: [String] = []
        let b = s.bandwidth
        func rate(_ limit: Int64?) -> String {
            switch limit {
            case nil: "no limit"
            case 0?: "paused"
            case let n?: "\(Units.humanBytes(n))/s"
            }
        }
        if b.timetable != nil {
            var line = "Bandwidth  \(rate(b.limit)) (timetable)"
            if let until = b.until.flatMap(Timestamp.parse) {
                line += " until \(localTime(until, now: now))" + (b.nextLimit != b.limit ? ", then \(rate(b.nextLimit))" : "")
            }
            out.append(line)
        } else if let limit = b.limit {
            out.append("Bandwidth  \(rate(limit))")
        }
        let n = s.notify
        if !n.channels.isEmpty {
            var line = "Notify     \(n.channels.joined(separator: ", "))"
            if let at = n.lastSentAt { line += "; last sent \(at)" }
            out.append(line)
            for c in n.perChannel where c.lastError != nil {
                out.append(tint("           \(c.channel) failing: \(c.lastError ?? "")" + (c.pending > 0 ? " (\(c.pending) waiting, retried)" : ""), "33"))
            }
        }
        if let line = webLine(s.web) { out.append(line.hasPrefix("!") ? tint(line, "33") : line) }
        return out
    }

    /// The status page (web.md): where it is, or why it is not served.
    static func webLine(_ w: DaemonStatus.Web?) -> String? {
        guard let w, let listen = w.listen else { return nil }
        if let why = w.lastError { return "! Web      not served on \(listen): \(why) (tried again every minute)" }
        guard let url = w.url else { return "Web        starting on \(listen)" }
        var line = "Web        \(url)"
        if w.plainHTTPBeyondLoopback { line += " (plain HTTP beyond loopback: allow_plain_http)" }
        if w.sessions > 0 { line += "; \(w.sessions) session\(w.sessions == 1 ? "" : "s") open" }
        return line
    }

    /// A time of the NAS's day: "18:00", or with the weekday when it is not within a day.
    package static func localTime(_ date: Date, now: Date, timeZone: TimeZone = .current) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let c = calendar.dateComponents([.weekday, .hour, .minute], from: date)
        let time = String(format: "%02d:%02d", c.hour ?? 0, c.minute ?? 0)
        guard date.timeIntervalSince(now) >= 86400 - 60, let day = c.weekday else { return time }
        return ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"][day - 1] + " " + time
    }

    package static func bar(_ fraction: Double, width: Int) -> String {
        let filled = max(0, min(width, Int((fraction * Double(width)).rounded(.down))))
        return "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "]"
    }

    package static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m\(s % 60)s" }
        return "\(s / 3600)h\((s % 3600) / 60)m"
    }
}
