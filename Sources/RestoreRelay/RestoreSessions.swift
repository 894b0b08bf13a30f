import Control
import Foundation
import PhotolalaCore
import RestoreWire

/// The restores under way, as their commands report them: what `status` shows. A session
/// not heard from for `staleAfter` seconds is taken for gone (its command was killed).
package struct RestoreSessions: Sendable {
    struct Session: Sendable {
        var report: RestoreReport
        var startedAt: Date
        var updatedAt: Date
    }

    package var staleAfter: TimeInterval = 60
    private var sessions: [String: Session] = [:]

    package init() {}

    /// Opens (no id) or updates a session; returns its id.
    package mutating func update(_ report: RestoreReport, now: Date) -> String {
        sessions = sessions.filter { now.timeIntervalSince($0.value.updatedAt) < staleAfter * 10 }
        let id = report.id.flatMap { sessions[$0] == nil ? nil : $0 } ?? UUID().uuidString.lowercased()
        var r = report
        r.id = id
        // What the opening said (the device's id, where to, as of when) holds for the
        // whole session: the later reports carry only progress and the end.
        if let opening = sessions[id]?.report {
            r.deviceId = r.deviceId ?? opening.deviceId
            r.to = r.to ?? opening.to
            r.asOf = r.asOf ?? opening.asOf
            r.paths = r.paths ?? opening.paths
        }
        let started = sessions[id]?.startedAt ?? now
        sessions[id] = Session(report: r, startedAt: started, updatedAt: now)
        return id
    }

    /// The session's last report, if it is open.
    package func report(_ id: String?) -> RestoreReport? {
        id.flatMap { sessions[$0]?.report }
    }

    /// The most recently heard-from restore still running, with the daemon's read rate.
    package func current(now: Date, rate: Double) -> DaemonStatus.Restore? {
        guard let s = sessions.values.filter({ !$0.report.finished && now.timeIntervalSince($0.updatedAt) < staleAfter })
            .max(by: { $0.updatedAt < $1.updatedAt }) else { return nil }
        let r = s.report
        let left = max(0, r.bytesTotal - r.bytesDone)
        return DaemonStatus.Restore(
            device: r.device, filesDone: r.filesDone, filesTotal: r.filesTotal, bytesDone: r.bytesDone, bytesTotal: r.bytesTotal,
            rate: rate, etaSeconds: rate > 0 && r.waitingArchived == 0 ? Double(left) / rate : nil, waitingArchived: r.waitingArchived,
            archiveClass: r.archiveClass, archiveWait: r.archiveClass.map(ArchiveClass.typicalWait), startedAt: Timestamp.string(s.startedAt))
    }
}
