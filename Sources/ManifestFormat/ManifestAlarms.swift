import Foundation
import PhotolalaCore

/// The devices whose manifest this NAS refused as a downgrade or a rollback (privacy.md "No
/// side doors"): the manifest stage (this NAS's own device) and restore (any device) report
/// what they find here; each new finding is one audit record `manifest.refused`; the status
/// shows them (`manifestAlarms`, attention `manifestDowngrade`, `manifestRollback`), so a
/// notification says so, until a later read of that device finds it whole.
package actor ManifestAlarms {
    private let audit: (any AuditRecorder)?
    private let statusChanges: ChangeFeed
    private let clock: any DaemonClock
    private var alarms: [String: DaemonStatus.ManifestAlarm] = [:]

    package init(audit: (any AuditRecorder)? = nil, statusChanges: ChangeFeed = ChangeFeed(), clock: any DaemonClock = SystemClock()) {
        self.audit = audit
        self.statusChanges = statusChanges
        self.clock = clock
    }

    /// A finding about `device`: recorded once (the same finding again records nothing).
    package func raise(device: String, kind: DaemonStatus.ManifestAlarm.Kind, message: String, action: String,
                       details: AuditDetails = [:]) {
        let known = alarms[device]
        alarms[device] = DaemonStatus.ManifestAlarm(device: device, kind: kind, message: message, action: action,
                                                    at: known?.message == message ? known!.at : Timestamp.string(clock.now()))
        guard known?.message != message || known?.kind != kind else { return }
        var d = details
        d["device"] = .string(device)
        d["why"] = .string(kind.rawValue)
        d["message"] = .string(message)
        audit?.record(AuditEvent(.manifestRefused, by: .daemon, .refused, d))
        statusChanges.changed()
    }

    /// A refusal that is not an alarm (an object that does not authenticate): recorded, not shown.
    package func record(device: String, why: String, message: String) {
        audit?.record(AuditEvent(.manifestRefused, by: .daemon, .refused,
                                 ["device": .string(device), "why": .string(why), "message": .string(message)]))
    }

    /// `device` was read whole again (or is this NAS's own, written again).
    package func clear(device: String, kind: DaemonStatus.ManifestAlarm.Kind? = nil) {
        guard let known = alarms[device], kind == nil || known.kind == kind else { return }
        alarms[device] = nil
        statusChanges.changed()
    }

    package var current: [DaemonStatus.ManifestAlarm] { alarms.values.sorted { $0.device < $1.device } }

    package func contribute(to s: inout DaemonStatus) {
        s.manifestAlarms = current
    }
}
