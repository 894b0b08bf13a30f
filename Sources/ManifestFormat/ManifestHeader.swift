/// The JSON header of a manifest object.
package struct ManifestHeader: Codable, Sendable, Equatable {
    package enum Kind: String, Codable, Sendable {
        case log
        case snapshot
        case snapshotIndex = "snapshot-index"
    }

    /// A snapshot part as its index names it.
    package struct Part: Codable, Sendable, Equatable {
        package var part: Int
        /// Format 1: the SHA-256 the part carries (its bytes 8..<40); format 2: the
        /// SHA-256 of the part's sealed bytes. Hex.
        package var sha256: String
        package var entries: Int
        package init(part: Int, sha256: String, entries: Int) {
            self.part = part
            self.sha256 = sha256
            self.entries = entries
        }
    }

    package var format: Int
    package var kind: Kind
    /// The device id the manifest belongs to.
    package var device: String
    /// A log segment's number (1, 2, …); for a snapshot (part or index) the last log
    /// segment it covers.
    package var seq: Int64
    /// A snapshot part's number (1, 2, …).
    package var part: Int?
    /// Records in this object (for an index: in all its parts).
    package var entries: Int
    /// The watched folders the records refer to, by index.
    package var folders: [String]
    package var createdAt: String
    /// A snapshot index's parts, in order.
    package var parts: [Part]?
    /// The writer's own bookkeeping (which local database wrote it and how far its change
    /// list was consumed): lets a restarted daemon take back a segment it wrote but did
    /// not get to record. Readers ignore both.
    package var writer: String?
    package var through: Int64?
    /// Format 2, the chain (privacy.md "Freshness"): in a log segment, the hex SHA-256 of
    /// log segment `seq - 1`'s sealed bytes (64 zeros when there is none); in a snapshot's
    /// parts and index, that of log segment `seq`, the last one it covers (so the log
    /// after it links to the snapshot once the logs it covers are gone).
    package var prev: String?
    /// Sealed again under a new account key (`--new-account-key`): the SHA-256 of the sealed
    /// bytes it had before. A link (`prev`, an index's part, a record's head) that names those
    /// old bytes still holds: the next object may not have been sealed again yet.
    package var resealedFrom: String?
    /// Format 2: the user and group names the records' owners refer to, by index + 1.
    package var users: [String]?
    package var groups: [String]?

    package init(kind: Kind, device: String, seq: Int64, part: Int? = nil, createdAt: String, parts: [Part]? = nil,
                writer: String? = nil, through: Int64? = nil, prev: String? = nil) {
        format = ManifestSegment.sealedFormat
        self.kind = kind
        self.device = device
        self.seq = seq
        self.part = part
        entries = 0
        folders = []
        self.createdAt = createdAt
        self.parts = parts
        self.writer = writer
        self.through = through
        self.prev = prev
    }

    /// The `prev` of log segment 1: there is nothing before it.
    package static let noPrevious = String(repeating: "0", count: 64)
}
