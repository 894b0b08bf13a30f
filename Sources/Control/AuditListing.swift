import PhotolalaCore

/// `GET /v1/audit?since=MILLIS&limit=N` (`photolalactl audit --json`): the newest records,
/// oldest first; `more` when older ones were left out by the limit.
package struct AuditListing: Codable, Sendable, Equatable {
    package static let defaultLimit = 100
    package static let maxLimit = 10_000

    package var records: [AuditRecord]
    package var more: Bool

    package init(records: [AuditRecord], more: Bool) {
        self.records = records
        self.more = more
    }
}
