/// The one-line answer to "is my stuff backed up?": systemd's STATUS= line and the
/// headline of `photolalactl status` are the same sentence.
package enum StatusSummary {
    package static func oneLine(_ s: DaemonStatus) -> String {
        let q = s.queue
        let waiting = q.pending + q.hashing + q.uploading
        let backlog = waiting > 0 ? "\(waiting) waiting (\(Units.humanBytes(q.pendingBytes)))" : "nothing waiting"
        let failed = q.failed > 0 ? ", \(q.failed) failed" : ""
        switch s.state {
        case .starting: return "Starting"
        case .stopping: return "Stopping"
        case .needsLogin:
            if let p = s.pairing {
                return "Pairing: confirm code \(p.userCode) at \(p.verificationUri) — \(backlog), \(q.uploaded) backed up\(failed)"
            }
            return "Not signed in: run \(s.ctl) login — \(backlog), \(q.uploaded) backed up\(failed)"
        case .paused:
            let why = s.pauseReason.map { "\($0.rawValue)" } ?? "paused"
            return "Paused (\(why)) — \(backlog), \(q.uploaded) backed up\(failed)"
        case .running:
            if waiting == 0 && q.uploaded == 0 && q.failed == 0 {
                return "Running: no photos found yet in the watched folders"
            }
            if waiting == 0 {
                return q.failed > 0
                    ? "\(q.uploaded) files backed up, \(q.failed) failed (photolalactl queue --failed)"
                    : "All \(q.uploaded) files backed up"
            }
            if s.s3?.state == .backoff {
                // Every upload waits for S3: "backing up" would hide that nothing moves.
                return "Waiting for S3 (retrying after errors): \(backlog), \(q.uploaded) backed up\(failed)"
            }
            if q.uploading > 0 {
                return "Backing up: \(q.uploading) uploading, \(backlog), \(q.uploaded) backed up\(failed)"
            }
            if q.hashing > 0 {
                return "Reading new photos: \(backlog), \(q.uploaded) backed up\(failed)"
            }
            return "Backing up: \(backlog), \(q.uploaded) backed up\(failed)"
        }
    }
}
