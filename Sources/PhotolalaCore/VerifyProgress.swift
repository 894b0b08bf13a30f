/// Where a `photolalactl verify` stands: what `POST /v1/verify` and `GET /v1/verify`
/// answer, polled by the command until `phase` is `done` or `failed`.
package struct VerifyProgress: Codable, Sendable, Equatable {
    package enum Phase: String, Codable, Sendable {
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

    package var phase: Phase
    package var done: Int
    @Null package var total: Int?
    @Null package var startedAt: String?
    /// The counts so far; final once `phase` is `done` or `failed`.
    package var result: DaemonStatus.Verify

    package init(phase: Phase = .idle, done: Int = 0, total: Int? = nil, startedAt: String? = nil,
                result: DaemonStatus.Verify = DaemonStatus.Verify()) {
        self.phase = phase
        self.done = done
        self.total = total
        self.startedAt = startedAt
        self.result = result
    }

    package var isFinished: Bool { phase == .done || phase == .failed || phase == .idle }
}

/// `POST /v1/verify`'s body: `deep` is the share of objects to read back, in percent.
package struct VerifyRequest: Codable, Sendable, Equatable {
    @Null package var deep: Double?
    package init(deep: Double? = nil) {
        self.deep = deep
    }
}
