/// The JSON header of a manifest object.
public struct ManifestHeader: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        case log
        case snapshot
        case snapshotIndex = "snapshot-index"
    }

    /// A snapshot part as its index names it.
    public struct Part: Codable, Sendable, Equatable {
        public var part: Int
        /// The SHA-256 the part carries (its bytes 8..<40), hex.
        public var sha256: String
        public var entries: Int
        public init(part: Int, sha256: String, entries: Int) {
            self.part = part
            self.sha256 = sha256
            self.entries = entries
        }
    }

    public var format: Int
    public var kind: Kind
    /// The device id the manifest belongs to.
    public var device: String
    /// A log segment's number (1, 2, …); for a snapshot (part or index) the last log
    /// segment it covers.
    public var seq: Int64
    /// A snapshot part's number (1, 2, …).
    public var part: Int?
    /// Records in this object (for an index: in all its parts).
    public var entries: Int
    /// The watched folders the records refer to, by index.
    public var folders: [String]
    public var createdAt: String
    /// A snapshot index's parts, in order.
    public var parts: [Part]?
    /// The writer's own bookkeeping (which local database wrote it and how far its change
    /// list was consumed): lets a restarted daemon take back a segment it wrote but did
    /// not get to record. Readers ignore both.
    public var writer: String?
    public var through: Int64?

    public init(kind: Kind, device: String, seq: Int64, part: Int? = nil, createdAt: String, parts: [Part]? = nil,
                writer: String? = nil, through: Int64? = nil) {
        format = ManifestSegment.formatVersion
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
    }
}
