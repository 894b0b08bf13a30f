/// The wire type of `photolalactl restore --by-date` (privacy.md "Export every photo of
/// the account"). The objects are listed by `GET /v1/restore/export` (text lines, see
/// `ExportLine`) and read through the restore's own calls.

/// `POST /v1/restore/export/report`: an export begins (`step` "started") or ends
/// ("finished"), with its destination and counts, for the audit trail (cli.md "audit").
package struct ExportReport: Codable, Sendable, Equatable {
    package enum Step: String, Codable, Sendable {
        case started, finished
    }

    package var step: Step
    /// `--to` as given.
    package var to: String
    /// Objects under `photos/{userId}/` that are photos (`{md5}.dat`).
    package var objects: Int
    package var bytes: Int64
    package var written: Int
    package var alreadyThere: Int
    package var kept: Int
    package var failed: Int
    /// Keys under the prefix that are not `{md5}.dat`, left alone.
    package var skipped: Int
    package var waitingArchived: Int
    package var interrupted: Bool

    package init(step: Step, to: String, objects: Int, bytes: Int64, written: Int = 0, alreadyThere: Int = 0, kept: Int = 0,
                 failed: Int = 0, skipped: Int = 0, waitingArchived: Int = 0, interrupted: Bool = false) {
        self.step = step
        self.to = to
        self.objects = objects
        self.bytes = bytes
        self.written = written
        self.alreadyThere = alreadyThere
        self.kept = kept
        self.failed = failed
        self.skipped = skipped
        self.waitingArchived = waitingArchived
        self.interrupted = interrupted
    }
}

extension RestoreReport {
    /// The `device` an export's session goes by (`status` shows it): the daemon records an
    /// export's start and end from its `ExportReport`s, not from its session.
    package static let exportDevice = "every photo of the account, by date"
}
