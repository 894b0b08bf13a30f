import Foundation

/// Something that needs the user: the one list behind the human status's "Action needed"
/// lines, `status --json`'s `attention`, and the notifications (config.md "Notifications").
package struct AttentionItem: Codable, Sendable, Equatable {
    package enum Reason: String, Codable, Sendable, CaseIterable {
        /// Not signed in, on a NAS that was signed in before: backups that ran have stopped.
        case notSignedIn
        case appleRevoked, appleNotFound, appleTransferred
        case quotaExceeded, subscriptionRequired, accountRevoked
        /// A watched folder missing or unreadable (one item per folder).
        case folderMissing
        case stateDirectoryFull, stateDirectoryUnwritable
        /// S3 failing as a whole for longer than the threshold (30 minutes).
        case s3Failing
        /// A certificate of S3 or the backend refused (expired, unknown CA, wrong host).
        case certificateRefused
        /// The account has a recovery key this NAS does not hold: the manifest waits for it.
        case recoveryKeyNeeded
        /// The account's key object is missing or does not check out (status `recovery`).
        case recoveryKeyUnreadable
        /// The key object was replaced by one not written with the account key (or an older
        /// copy was put back): this NAS wrote its own over it (privacy.md "No side doors").
        case keyObjectReplaced
        /// A device's manifest was replaced by one in the old plaintext format although the
        /// device is sealed for good: refused, never read (subject: the device id).
        case manifestDowngrade
        /// A device's manifest was found rolled back or cut short (a record put back, the
        /// newest segments deleted, below what another NAS vouches for; subject: the device id).
        case manifestRollback
        /// `[web] listen`, set in the config, cannot be served (web.md).
        case webUnavailable
        /// The mirror's folder has less free space than `mirror.min_free`: it waits (mirror.md).
        case mirrorDiskFull
        /// The mirror's folder is missing, unmarked (a volume not mounted) or not writable.
        case mirrorFolder
        /// Objects the mirror refused again and again (a body that is not what its key says).
        case mirrorRefused
    }

    package enum Severity: String, Codable, Sendable {
        /// Nothing is backed up until it is fixed.
        case critical
        /// Part of the backup stopped (one folder), the rest goes on.
        case warning
    }

    package var reason: Reason
    package var severity: Severity
    /// What is wrong and what it means for the backup.
    package var message: String
    /// What to do, in words (with the command, if one fixes it).
    @Null package var action: String?
    /// The command that fixes it, for scripts.
    @Null package var run: String?
    /// What the item is about when a reason can hold several at once: a folder's path.
    @Null package var subject: String?

    package init(reason: Reason, severity: Severity, message: String, action: String? = nil, run: String? = nil, subject: String? = nil) {
        self.reason = reason
        self.severity = severity
        self.message = message
        self.action = action
        self.run = run
        self.subject = subject
    }

    /// One problem per reason and subject: what the notification policy tracks.
    package var key: String { subject.map { "\(reason.rawValue):\($0)" } ?? reason.rawValue }

    /// The whole sentence a person reads: what is wrong, then what to do.
    package var sentence: String { action.map { "\(message) \($0)" } ?? message }
}

/// Derives the attention items from a status snapshot and the few facts the snapshot does
/// not carry. Pure: the time comes in, so the S3 threshold is tested with plain dates.
package struct AttentionRules: Sendable, Equatable {
    /// What the status does not show but the rules need.
    package struct Facts: Sendable, Equatable {
        /// This NAS was signed in before (it has its device id): "not signed in" then
        /// means backups that ran have stopped, not a fresh install waiting for a login.
        package var signedInBefore = false
        /// The queue database's write problem, if any (disk full, read-only, I/O error).
        package var databaseProblem: String?
        package init(signedInBefore: Bool = false, databaseProblem: String? = nil) {
            self.signedInBefore = signedInBefore
            self.databaseProblem = databaseProblem
        }
    }

    /// S3 failing for longer than this needs the user (config.md: 30 minutes).
    package var s3FailingAfter: TimeInterval

    package init(s3FailingAfter: TimeInterval = 1800) {
        self.s3FailingAfter = s3FailingAfter
    }

    /// The tests' knob: `PHOTOLALAD_S3_FAILING_AFTER` (a duration such as "5s") shortens
    /// the 30 minutes so an e2e test can wait it out.
    package static let thresholdVariable = "PHOTOLALAD_S3_FAILING_AFTER"

    package init(environment: [String: String]) {
        self.init()
        if let d = environment[Self.thresholdVariable].flatMap(Units.parseDuration), d > .zero {
            s3FailingAfter = Units.seconds(d)
        }
    }

    static let login = "sudo photolalactl login"
    static let enterRecoveryKey = "sudo photolalactl recovery-key --enter"

    package func items(for s: DaemonStatus, facts: Facts, now: Date) -> [AttentionItem] {
        var out: [AttentionItem] = []
        if s.state == .needsLogin && facts.signedInBefore {
            out.append(.init(reason: .notSignedIn, severity: .critical,
                             message: "This NAS is not signed in to Photolala any more: nothing is backed up.",
                             action: "Sign in again: \(Self.login)", run: Self.login))
        }
        if let item = Self.pauseItem(s.pauseReason) { out.append(item) }
        if let problem = facts.databaseProblem {
            let full = problem.hasPrefix("disk full")
            // "disk full" stays in the sentence: scripts (and the storage test) look for it.
            let message = full ? "Nothing new can be recorded (disk full)" + problem.dropFirst("disk full".count)
                               : Self.capitalized(problem)
            out.append(.init(reason: full ? .stateDirectoryFull : .stateDirectoryUnwritable, severity: .critical,
                             message: message))
        }
        if let cert = certificateSentence(in: s) {
            out.append(.init(reason: .certificateRefused, severity: .critical, message: Self.capitalized(cert)))
        }
        if let h = s.s3, h.state == .backoff, let since = h.since.flatMap(Timestamp.parse),
           now.timeIntervalSince(since) >= s3FailingAfter {
            let minutes = Int(now.timeIntervalSince(since) / 60)
            let lasting = minutes >= 1 ? "for \(minutes) minute\(minutes == 1 ? "" : "s")" : "since \(h.since ?? "")"
            out.append(.init(reason: .s3Failing, severity: .critical,
                             message: "S3 has been failing \(lasting): nothing reaches the bucket" + (h.lastError.map { " (last error: \($0))" } ?? "") + ".",
                             action: "Uploads retry by themselves; check the storage service and this NAS's network."))
        }
        if let item = Self.recoveryItem(s.recovery) { out.append(item) }
        if let why = s.recovery.keyObjectReplaced {
            out.append(.init(reason: .keyObjectReplaced, severity: .warning, message: why,
                             action: "See what happened: photolalactl audit", run: "photolalactl audit"))
        }
        for alarm in s.manifestAlarms {
            out.append(.init(reason: alarm.kind == .downgrade ? .manifestDowngrade : .manifestRollback, severity: .warning,
                             message: alarm.message, action: alarm.action, subject: alarm.device))
        }
        if let web = s.web, web.listenSet, let why = web.lastError {
            out.append(.init(reason: .webUnavailable, severity: .warning,
                             message: "The status page is not served: \(why).",
                             action: "Choose a free port or an address of this NAS in [web] listen (or \"off\"), then `systemctl reload photolalad`; the daemon tries again every minute."))
        }
        out += Self.mirrorItems(s.mirror)
        for folder in s.watch.missingFolders {
            out.append(.init(reason: .folderMissing, severity: .warning,
                             message: "The watched folder \(folder) is missing or unreadable: nothing in it is backed up.",
                             action: "Mount it again, or let the user photolala read it; the daemon looks again by itself.",
                             subject: folder))
        }
        return out
    }

    /// When the items may change with no change to the status: S3 crossing the threshold.
    package func nextChange(for s: DaemonStatus, now: Date) -> Date? {
        guard let h = s.s3, h.state == .backoff, let since = h.since.flatMap(Timestamp.parse) else { return nil }
        let at = since.addingTimeInterval(s3FailingAfter)
        return at > now ? at : nil
    }

    package static func pauseItem(_ reason: DaemonStatus.PauseReason?) -> AttentionItem? {
        switch reason {
        case nil, .user?, .schedule?: return nil
        case .appleRevoked?:
            return .init(reason: .appleRevoked, severity: .critical,
                         message: "The Apple ID no longer authorizes Photolala on this NAS: uploads are paused.",
                         action: "Sign in again: \(login)", run: login)
        case .appleNotFound?:
            return .init(reason: .appleNotFound, severity: .critical,
                         message: "Apple does not know this sign-in any more: uploads are paused.",
                         action: "Sign in again: \(login)", run: login)
        case .appleTransferred?:
            return .init(reason: .appleTransferred, severity: .critical,
                         message: "The Apple ID was transferred to another team: uploads are paused.",
                         action: "Sign in again: \(login)", run: login)
        case .quotaExceeded?:
            return .init(reason: .quotaExceeded, severity: .critical,
                         message: "The Photolala storage is full: uploads are paused.",
                         action: "Free space or upgrade in the Photolala app; uploads resume by themselves within 15 minutes (or run `photolalactl resume`).")
        case .subscriptionRequired?:
            return .init(reason: .subscriptionRequired, severity: .critical,
                         message: "The Photolala subscription has ended: uploads are paused.",
                         action: "Renew it in the Photolala app; uploads resume by themselves within 15 minutes (or run `photolalactl resume`).")
        case .accountRevoked?:
            return .init(reason: .accountRevoked, severity: .critical,
                         message: "The Photolala account was disabled: uploads are paused.",
                         action: "Contact Photolala support, then sign in again: \(login)", run: login)
        }
    }

    /// Only the manifest waits for the key (photos go on), so never critical.
    package static func recoveryItem(_ r: DaemonStatus.Recovery) -> AttentionItem? {
        switch r.state {
        case .none, .checking, .ready:
            return nil
        case .needed:
            return .init(reason: .recoveryKeyNeeded, severity: .warning,
                         message: "This NAS does not hold this account's recovery key: photos go on uploading, only this NAS's manifest waits.",
                         action: "Enter this account's recovery key: \(enterRecoveryKey)", run: enterRecoveryKey)
        case .unreadable:
            return .init(reason: .recoveryKeyUnreadable, severity: .warning,
                         message: r.message ?? "This account's key object in the bucket is missing or does not check out: this NAS's manifest waits.")
        }
    }

    /// Objects refused this many times in a row need the user (one refusal may be a store
    /// caught mid-write; three, hours apart, are not).
    package static let mirrorRefusalsForAttention = 3

    /// The mirror's pause for a full disk or a folder problem, and objects refused again
    /// and again; the mirror's other pauses (the account, the user, the timetable) are told
    /// by the items of their own or need nothing.
    package static func mirrorItems(_ m: DaemonStatus.Mirror) -> [AttentionItem] {
        var out: [AttentionItem] = []
        let folder = m.folder ?? "the mirror's folder"
        if m.state == .paused, m.pauseReason == .diskFull {
            out.append(.init(reason: .mirrorDiskFull, severity: .warning,
                             message: "The mirror's folder \(folder) has less free space than mirror.min_free: no more photos are copied to this NAS.",
                             action: "Free space there (or lower mirror.min_free and reload); the mirror resumes by itself.", subject: folder))
        }
        if m.state == .paused, m.pauseReason == .folder {
            out.append(.init(reason: .mirrorFolder, severity: .warning,
                             message: m.lastError.map { "The mirror waits: \($0)" } ?? "The mirror's folder \(folder) is missing, not mounted or not writable: no photos are copied to this NAS.",
                             action: "Mount it (or fix its permissions); the mirror looks again by itself.", subject: folder))
        }
        if m.refusedRepeatedly > 0 {
            let n = m.refusedRepeatedly
            out.append(.init(reason: .mirrorRefused, severity: .warning,
                             message: "\(n) object\(n == 1 ? "" : "s") of the account \(n == 1 ? "was" : "were") refused \(mirrorRefusalsForAttention) times or more: \(n == 1 ? "its" : "their") bytes are not what \(n == 1 ? "its key says" : "their keys say"), so no copy was made.",
                             action: "See which with `photolalactl mirror`; the audit trail has each refusal (mirror.refused)."))
        }
        return out
    }

    /// The sentence a refused certificate left in any part's last error (TLSTrust.explain
    /// writes "certificate for HOST is not trusted: …" or "tls.ca_file … cannot be used").
    func certificateSentence(in s: DaemonStatus) -> String? {
        let errors = [s.s3?.lastError, s.credentials.lastError, s.appleCredential.lastError, s.inventory.lastError,
                      s.catalog.lastError, s.manifest?.lastError].compactMap { $0 }
        for e in errors {
            if let r = e.range(of: "certificate for "), e[r.upperBound...].contains(" is not trusted: ") {
                return String(e[r.lowerBound...])
            }
            if let r = e.range(of: "tls.ca_file "), e[r.upperBound...].contains("cannot be used") {
                return String(e[r.lowerBound...])
            }
        }
        return nil
    }

    static func capitalized(_ text: String) -> String {
        guard let first = text.first else { return text }
        return first.uppercased() + text.dropFirst()
    }
}
