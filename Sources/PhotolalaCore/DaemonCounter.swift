import CoreMetrics

/// Every counter the daemon keeps: its Prometheus name, help and label names, in one
/// place. The part that does the work counts through swift-metrics' API
/// (`DaemonCounter.s3Requests.increment("PutObject", "2xx")`); the daemon bootstraps the
/// factory that turns them into Prometheus counters, and nothing outside this list gets
/// through it. Gauges are not here: they are rendered from the status snapshot.
///
/// No label carries a path, a user id, a key or anything secret: every label value is one
/// of a few words the code itself chooses.
package enum DaemonCounter: String, CaseIterable, Sendable {
    case s3Requests = "photolala_s3_requests_total"
    case s3ForbiddenResponses = "photolala_s3_forbidden_responses_total"
    case s3SentBytes = "photolala_s3_sent_bytes_total"
    case s3Outages = "photolala_s3_outages_total"
    case uploadedObjects = "photolala_uploaded_objects_total"
    case uploadedBytes = "photolala_uploaded_bytes_total"
    case uploadedFiles = "photolala_uploaded_files_total"
    case deduplicatedObjects = "photolala_deduplicated_objects_total"
    case failedObjects = "photolala_failed_objects_total"
    case uploadRetries = "photolala_upload_retries_total"
    case credentialExpirationMisses = "photolala_credential_expiration_misses_total"
    case stsFetches = "photolala_sts_credential_fetches_total"
    case stsRefreshes = "photolala_sts_credential_refreshes_total"
    case stsFailures = "photolala_sts_credential_failures_total"
    case accessTokenRefreshes = "photolala_access_token_refreshes_total"
    case backendRequests = "photolala_backend_requests_total"
    case appleChecks = "photolala_apple_credential_checks_total"
    case hashedFiles = "photolala_hashed_files_total"
    case hashedBytes = "photolala_hashed_bytes_total"
    case inotifyOverflows = "photolala_inotify_overflows_total"
    case notifications = "photolala_notifications_total"
    case mirrorBytes = "photolala_mirror_bytes_total"
    case mirrorRefused = "photolala_mirror_refused_total"

    package var name: String { rawValue }

    package var labelNames: [String] {
        switch self {
        case .s3Requests: ["operation", "status_class"]
        case .s3ForbiddenResponses: ["operation"]
        case .uploadRetries: ["reason"]
        case .accessTokenRefreshes: ["result"]
        case .backendRequests: ["endpoint", "status"]
        case .appleChecks: ["result"]
        case .notifications: ["channel", "result"]
        default: []
        }
    }

    package var help: String {
        switch self {
        case .s3Requests: "S3 requests sent, by operation and HTTP status class (2xx, 3xx, 4xx, 5xx, or error when no answer came)."
        case .s3ForbiddenResponses: "S3 requests answered 403 Forbidden, by operation (HeadObject answers 403 for a missing key when listing is not allowed)."
        case .s3SentBytes: "Bytes of request bodies sent to S3, retries included."
        case .s3Outages: "Times S3 as a whole stopped answering properly and every upload began to wait."
        case .uploadedObjects: "Objects (one per distinct content) sent to S3 and accepted."
        case .uploadedBytes: "Bytes of the objects sent to S3 and accepted."
        case .uploadedFiles: "Files that became backed up because their object reached S3 or was found there."
        case .deduplicatedObjects: "Objects S3 already held (found by HEAD), so nothing was sent."
        case .failedObjects: "Objects given up on (rejected by S3 or unreadable); their files wait for photolalactl retry."
        case .uploadRetries: "Upload attempts that failed and were tried again, at once or later, by the kind of S3 error."
        case .credentialExpirationMisses: "Uploads S3 refused because the STS credentials had expired or were revoked (the credentials were refreshed and the upload retried)."
        case .stsFetches: "STS credentials received from the Photolala backend."
        case .stsRefreshes: "Of the STS credentials received, those that replaced credentials still valid (refreshed ahead of expiry)."
        case .stsFailures: "Requests for STS credentials that failed."
        case .accessTokenRefreshes: "Refreshes of the backend access token, by result (ok, error)."
        case .backendRequests: "Calls to the Photolala backend, by endpoint and HTTP status (error when no answer came)."
        case .appleChecks: "Apple credential-state checks, by result (authorized, revoked, notFound, transferred, error)."
        case .hashedFiles: "Files read and hashed."
        case .hashedBytes: "Bytes read and hashed."
        case .inotifyOverflows: "Times the kernel's inotify queue overflowed (events lost; the watched folders are rescanned)."
        case .notifications: "Notification attempts by channel (webhook, command, healthcheck) and result: sent, failed (retried), dropped (given up after a day)."
        case .mirrorBytes: "Bytes of objects the mirror read from the bucket and wrote into its folder, checked (mirror.md)."
        case .mirrorRefused: "Objects the mirror refused: a body whose MD5 (or SHA-256) is not the one its key and manifests name, or longer than listed."
        }
    }

    /// Label values known ahead: these series exist at 0 from the first scrape, so rates
    /// and `increase()` in alerts see the first event.
    package var knownLabelValues: [[String]] {
        switch self {
        case .accessTokenRefreshes: [["ok"], ["error"]]
        case .appleChecks: ["authorized", "revoked", "notFound", "transferred", "error"].map { [$0] }
        case .notifications: ["webhook", "command", "healthcheck"].flatMap { c in ["sent", "failed", "dropped"].map { [c, $0] } }
        case .s3Requests, .s3ForbiddenResponses, .uploadRetries, .backendRequests: []
        default: [[]]
        }
    }

    /// Counts `amount` more, with one value per label name, in order. The factory is the
    /// one in force for this task (the daemon's, or a test's `withMetricsFactory`).
    package func increment(by amount: Int64 = 1, _ labelValues: String..., factory: any MetricsFactory = MetricsSystem.factory) {
        assert(labelValues.count == labelNames.count, "\(name) takes the labels \(labelNames)")
        guard amount > 0 else { return }
        Counter(label: name, dimensions: Array(zip(labelNames, labelValues)), factory: factory).increment(by: amount)
    }

    /// The factory in force where it was made, for counting later on a thread that is
    /// not a Swift task (the watcher's), which a task-local factory does not reach.
    package struct Scope: Sendable {
        let factory: any MetricsFactory
        package init() { factory = MetricsSystem.factory }
        package func increment(_ counter: DaemonCounter, by amount: Int64 = 1) {
            counter.increment(by: amount, factory: factory)
        }
    }

    /// `2xx` … `5xx` for an HTTP status, as the S3 counters label it.
    package static func statusClass(_ status: Int) -> String {
        (100..<600).contains(status) ? "\(status / 100)xx" : "error"
    }
}
