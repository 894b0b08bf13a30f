import Foundation

/// Where this NAS's manifest stands, kept in the queue database (one JSON row of the
/// `setting` table) and changed only in the transaction that records a segment: which
/// account and device it belongs to, the last segment the bucket acknowledged, and the
/// totals the device's record shows.
package struct ManifestLedger: Codable, Sendable, Equatable {
    package var userId: String?
    package var deviceId: String?
    /// Made with the ledger: tells the segments this database wrote from those an earlier
    /// database (set aside as damaged, say) wrote under the same device.
    package var writer: String
    /// The last log segment in the bucket and mirrored here.
    package var seq: Int64 = 0
    /// The last snapshot written (it covers the log up to its number); 0: none.
    package var snapshot: Int64 = 0
    /// Records and segments in the log since that snapshot, and records in it.
    package var logEntries: Int64 = 0
    package var logSegments: Int64 = 0
    package var snapshotEntries: Int64 = 0
    /// Files the manifest holds as present now, and their bytes.
    package var files: Int64 = 0
    package var bytes: Int64 = 0
    /// The newest entry's time (ms since the epoch).
    package var lastChange: Int64?
    /// When the last segment was written (seconds since the epoch).
    package var writtenAt: Double?

    package init(userId: String?, deviceId: String?, writer: String = UUID().uuidString.lowercased()) {
        self.userId = userId
        self.deviceId = deviceId
        self.writer = writer
    }
}
