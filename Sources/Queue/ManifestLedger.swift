import Foundation

/// Where this NAS's manifest stands, kept in the queue database (one JSON row of the
/// `setting` table) and changed only in the transaction that records a segment: which
/// account and device it belongs to, the last segment the bucket acknowledged, and the
/// totals the device's record shows.
public struct ManifestLedger: Codable, Sendable, Equatable {
    public var userId: String?
    public var deviceId: String?
    /// Made with the ledger: tells the segments this database wrote from those an earlier
    /// database (set aside as damaged, say) wrote under the same device.
    public var writer: String
    /// The last log segment in the bucket and mirrored here.
    public var seq: Int64 = 0
    /// The last snapshot written (it covers the log up to its number); 0: none.
    public var snapshot: Int64 = 0
    /// Records and segments in the log since that snapshot, and records in it.
    public var logEntries: Int64 = 0
    public var logSegments: Int64 = 0
    public var snapshotEntries: Int64 = 0
    /// Files the manifest holds as present now, and their bytes.
    public var files: Int64 = 0
    public var bytes: Int64 = 0
    /// The newest entry's time (ms since the epoch).
    public var lastChange: Int64?
    /// When the last segment was written (seconds since the epoch).
    public var writtenAt: Double?

    public init(userId: String?, deviceId: String?, writer: String = UUID().uuidString.lowercased()) {
        self.userId = userId
        self.deviceId = deviceId
        self.writer = writer
    }
}
