/// Notify: telling the owner when backups stop (config.md "Notifications").
import Foundation
import PhotolalaCore

/// One notification, as the `json` webhook format sends it (config.md): what happened,
/// on which NAS, and the backup's state in three numbers. Never a token, key, Apple id or
/// user id: the text comes from the daemon's own sentences and is scrubbed once more by
/// `NotifyScrubber` before it leaves.
package struct NotifyEvent: Codable, Sendable, Equatable {
    package enum Kind: String, Codable, Sendable {
        case problem, recovered, summary
        /// `photolalactl notify --test`.
        case test
    }

    package enum Severity: String, Codable, Sendable {
        case critical, warning, info
    }

    /// The backup's state when the event was made.
    package struct Brief: Codable, Sendable, Equatable {
        package var state: String
        /// Files waiting to be read or uploaded.
        package var pending: Int
        package var uploaded: Int
        package init(state: String, pending: Int, uploaded: Int) {
            self.state = state
            self.pending = pending
            self.uploaded = uploaded
        }

        package init(_ s: DaemonStatus) {
            self.init(state: s.state.rawValue, pending: s.queue.pending + s.queue.hashing + s.queue.uploading, uploaded: s.queue.uploaded)
        }
    }

    package var event: Kind
    /// The attention reason (`appleRevoked`, …) for `problem` and `recovered`; null otherwise.
    @Null package var reason: String?
    package var severity: Severity
    package var title: String
    package var message: String
    package var device: String
    package var at: String
    package var status: Brief

    package init(event: Kind, reason: String?, severity: Severity, title: String, message: String, device: String, at: Date,
                status: Brief) {
        self.event = event
        self.reason = reason
        self.severity = severity
        self.title = title
        self.message = message
        self.device = device
        self.at = Timestamp.string(at)
        self.status = status
    }

    // MARK: the events the daemon sends

    package static func problem(_ item: AttentionItem, device: String, at: Date, status: Brief) -> NotifyEvent {
        NotifyEvent(event: .problem, reason: item.reason.rawValue, severity: item.severity == .critical ? .critical : .warning,
                    title: problemTitle(item.reason, device: device), message: item.sentence, device: device, at: at, status: status)
    }

    package static func recovered(_ reason: AttentionItem.Reason, subject: String?, device: String, at: Date, status: Brief) -> NotifyEvent {
        NotifyEvent(event: .recovered, reason: reason.rawValue, severity: .info, title: "Photolala backup running again on \(device)",
                    message: recoveredMessage(reason, subject: subject), device: device, at: at, status: status)
    }

    package static func summary(_ day: DaySummary, device: String, at: Date, status: DaemonStatus) -> NotifyEvent {
        NotifyEvent(event: .summary, reason: nil, severity: .info, title: "Photolala backup on \(device): today",
                    message: day.sentence(status), device: device, at: at, status: Brief(status))
    }

    package static func test(device: String, at: Date, status: Brief) -> NotifyEvent {
        NotifyEvent(event: .test, reason: nil, severity: .info, title: "Photolala test notification from \(device)",
                    message: "This is a test from photolalactl notify --test: notifications from \(device) reach you here.",
                    device: device, at: at, status: status)
    }

    package static func problemTitle(_ reason: AttentionItem.Reason, device: String) -> String {
        switch reason {
        case .appleRevoked, .appleNotFound, .appleTransferred, .quotaExceeded, .subscriptionRequired, .accountRevoked:
            "Photolala backup paused on \(device)"
        case .notSignedIn, .stateDirectoryFull, .stateDirectoryUnwritable, .s3Failing, .certificateRefused:
            "Photolala backup stopped on \(device)"
        case .folderMissing:
            "Photolala backup: a folder is missing on \(device)"
        case .recoveryKeyNeeded, .recoveryKeyUnreadable:
            "Photolala backup: the manifest waits for the account key on \(device)"
        case .keyObjectReplaced:
            "Photolala backup: the account's key object was replaced in the bucket, seen by \(device)"
        case .manifestDowngrade, .manifestRollback:
            "Photolala backup: a device's manifest was tampered with in the bucket, seen by \(device)"
        case .webUnavailable:
            "Photolala backup: the status page is not served on \(device)"
        case .mirrorDiskFull, .mirrorFolder:
            "Photolala mirror paused on \(device)"
        case .mirrorRefused:
            "Photolala mirror: objects refused on \(device)"
        }
    }

    package static func recoveredMessage(_ reason: AttentionItem.Reason, subject: String?) -> String {
        switch reason {
        case .notSignedIn: "This NAS is signed in again: backups resumed."
        case .appleRevoked, .appleNotFound, .appleTransferred: "The Apple ID authorizes Photolala on this NAS again: uploads resumed."
        case .quotaExceeded: "The Photolala storage has room again: uploads resumed."
        case .subscriptionRequired: "The Photolala subscription is active again: uploads resumed."
        case .accountRevoked: "The Photolala account works again: uploads resumed."
        case .folderMissing: "The watched folder \(subject ?? "") is back: it is backed up again."
        case .stateDirectoryFull: "The disk holding the state directory has room again: new photos are queued again."
        case .stateDirectoryUnwritable: "The state directory can be written again."
        case .s3Failing: "S3 answers again: uploads resumed."
        case .certificateRefused: "The storage's certificate is trusted again: uploads resumed."
        case .recoveryKeyNeeded, .recoveryKeyUnreadable: "This NAS holds the account key again: its manifest is written again."
        case .keyObjectReplaced: "The account's key object in the bucket is still the one this NAS put back."
        case .manifestDowngrade, .manifestRollback: "The manifest of device \(subject ?? "") reads whole again."
        case .webUnavailable: "The status page is served again."
        case .mirrorDiskFull: "The mirror's folder \(subject ?? "") has room again: photos are copied to this NAS again."
        case .mirrorFolder: "The mirror's folder \(subject ?? "") is back: photos are copied to this NAS again."
        case .mirrorRefused: "No object of the account is refused by the mirror any more."
        }
    }
}

/// What a day backed up, for the `summary` event (`notify.daily_summary`).
package struct DaySummary: Sendable, Equatable {
    package var files: Int
    package var bytes: Int64
    package init(files: Int, bytes: Int64) {
        self.files = files
        self.bytes = bytes
    }

    func sentence(_ s: DaemonStatus) -> String {
        let q = s.queue
        let waiting = q.pending + q.hashing + q.uploading
        var parts = ["Today \(files) file\(files == 1 ? "" : "s") (\(Units.humanBytes(bytes))) backed up; \(q.uploaded) in all."]
        parts.append(waiting == 0 ? "Nothing waits." : "\(waiting) waiting (\(Units.humanBytes(q.pendingBytes))).")
        if q.failed > 0 { parts.append("\(q.failed) failed (photolalactl queue --failed).") }
        if s.catalog.state != .off { parts.append("The Photolala apps show \(s.catalog.rows) photo\(s.catalog.rows == 1 ? "" : "s") from this NAS.") }
        if !s.attention.isEmpty { parts.append("Action needed: " + s.attention.map(\.message).joined(separator: " ")) }
        return parts.joined(separator: " ")
    }
}

/// The last line of defence: whatever text an event carries, no registered secret and
/// not the user id leaves the NAS in it.
package struct NotifyScrubber: Sendable {
    var userIds: [String]

    package init(userIds: [String?]) {
        self.userIds = userIds.compactMap { $0 }.filter { !$0.isEmpty }
    }

    package func scrub(_ event: NotifyEvent) -> NotifyEvent {
        var e = event
        e.title = scrub(e.title)
        e.message = scrub(e.message)
        return e
    }

    func scrub(_ text: String) -> String {
        var out = SecretRedactor.shared.redact(text)
        for id in userIds {
            out = out.replacingOccurrences(of: id, with: "{user}", options: .caseInsensitive)
        }
        return out
    }
}
