/// Where a `photolalactl verify` stands: what `POST /v1/verify` and `GET /v1/verify`
/// answer, polled by the command until `phase` is `done` or `failed`.
public struct VerifyProgress: Codable, Sendable, Equatable {
    public enum Phase: String, Codable, Sendable {
        /// No verify since the daemon started (`result` is the last one kept).
        case idle
        /// Waiting for a listing under way to end before its own begins.
        case queued
        /// Listing the bucket: `done` keys so far.
        case listing
        /// Comparing every backed-up object with the listing: `done` of `total`.
        case comparing
        /// `--deep`: reading objects back, `done` of `total`.
        case readingBack
        case done
        /// Could not finish (`result.lastError` says why); what it found so far is counted.
        case failed
    }

    public var phase: Phase
    public var done: Int
    @Null public var total: Int?
    @Null public var startedAt: String?
    /// The counts so far; final once `phase` is `done` or `failed`.
    public var result: DaemonStatus.Verify

    public init(phase: Phase = .idle, done: Int = 0, total: Int? = nil, startedAt: String? = nil,
                result: DaemonStatus.Verify = DaemonStatus.Verify()) {
        self.phase = phase
        self.done = done
        self.total = total
        self.startedAt = startedAt
        self.result = result
    }

    public var isFinished: Bool { phase == .done || phase == .failed || phase == .idle }
}

/// `POST /v1/verify`'s body: `deep` is the share of objects to read back, in percent.
public struct VerifyRequest: Codable, Sendable, Equatable {
    @Null public var deep: Double?
    public init(deep: Double? = nil) {
        self.deep = deep
    }
}
