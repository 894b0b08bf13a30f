import CoreMetrics
import Foundation
import Testing
import Control
import PhotolalaCore

/// Snapshots in every state the daemon can be in, rendered and read back.
@Suite("the exposition")
struct MetricsExpositionTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let userId = "550E8400-E29B-41D4-A716-446655440000"
    static let folder = "/srv/photos/Family Pictures"

    static func base(_ state: DaemonStatus.State) -> DaemonStatus {
        var s = DaemonStatus(state: state)
        s.startedAt = Timestamp.string(now.addingTimeInterval(-3600))
        s.watch.folders = 1
        s.watch.paths = [folder]
        s.watch.directories = 812
        s.watch.lastScanAt = Timestamp.string(now.addingTimeInterval(-60))
        return s
    }

    static func signedIn(_ s: DaemonStatus) -> DaemonStatus {
        var s = s
        s.account = .init(signedIn: true, userId: userId)
        s.appleCredential = .init(state: .authorized, checkedAt: Timestamp.string(now.addingTimeInterval(-600)),
                                  nextCheckAt: Timestamp.string(now.addingTimeInterval(6 * 3600)))
        s.credentials = .init(state: .valid, expiresAt: Timestamp.string(now.addingTimeInterval(2700)))
        s.s3 = .init(state: .ok)
        return s
    }

    static var uploading: DaemonStatus {
        var s = signedIn(base(.running))
        s.queue.pending = 12
        s.queue.hashing = 1
        s.queue.uploading = 3
        s.queue.uploaded = 58113
        s.queue.failed = 2
        s.queue.pendingBytes = 81_234_567
        s.queue.uploadedBytes = 912_345_678_901
        s.queue.oldestPendingAt = Timestamp.string(now.addingTimeInterval(-90))
        s.queue.lastUploadAt = Timestamp.string(now.addingTimeInterval(-2))
        return s
    }

    static var needsLogin: DaemonStatus {
        var s = base(.needsLogin)
        s.pairing = .init(userCode: "WDJB-MJHT", verificationUri: "https://photolala.example/pair", verificationUriComplete: nil, expiresAt: nil)
        s.queue.pending = 40
        return s
    }

    static func paused(_ reason: DaemonStatus.PauseReason) -> DaemonStatus {
        var s = signedIn(base(.paused))
        s.pauseReason = reason
        if reason == .appleRevoked {
            s.appleCredential.state = .revoked
            s.credentials = .init(state: .none)
        }
        s.queue.pending = 7
        return s
    }

    static var outage: DaemonStatus {
        var s = uploading
        s.s3 = .init(state: .backoff, failures: 4, since: Timestamp.string(now.addingTimeInterval(-30)),
                     nextAttemptAt: Timestamp.string(now.addingTimeInterval(20)), lastError: "S3 answered 503 Slow Down")
        s.credentials = .init(state: .backoff, expiresAt: Timestamp.string(now.addingTimeInterval(-5)), lastError: "timed out")
        s.watch.watchLimitReached = true
        s.watch.maxUserWatches = 8192
        s.watch.unwatchedDirectories = 300
        s.watch.missingFolders = ["/mnt/usb/DCIM"]
        s.problems = ["disk full: the queue database (/var/lib/photolala/queue.db) cannot grow"]
        return s
    }

    static var laterStages: DaemonStatus {
        var s = uploading
        s.catalog = .init(state: .published, rows: 58113, publishedAt: Timestamp.string(now.addingTimeInterval(-300)))
        s.thumbnails = .init(done: 58001, pending: 110, failed: 2)
        s.inventory = .init(objects: 60212, listedAt: Timestamp.string(now.addingTimeInterval(-7200)))
        s.verify = .init(checkedAt: Timestamp.string(now.addingTimeInterval(-86400)), checked: 60000, missing: 3, mismatched: 1)
        return s
    }

    static let every: [(String, DaemonStatus)] = [
        ("starting", base(.starting)), ("needsLogin", needsLogin), ("uploading", uploading), ("outage", outage),
        ("laterStages", laterStages), ("stopping", base(.stopping)),
    ] + DaemonStatus.PauseReason.allCases.map { ("paused \($0.rawValue)", paused($0)) }

    static func read(_ s: DaemonStatus, counters: CatalogMetricsFactory = CatalogMetricsFactory()) throws -> (String, ExpositionParser) {
        let text = String(decoding: MetricsExposition(counters: counters.registry).render(s, now: now), as: UTF8.self)
        return (text, try ExpositionParser(text))
    }

    @Test("every state reads back: each family has HELP and TYPE, one state at 1, nothing private", arguments: every.map(\.0))
    func everyStateReadsBack(name: String) throws {
        let s = Self.every.first { $0.0 == name }!.1
        let (text, parsed) = try Self.read(s)
        for family in SnapshotGauges.families {
            let f = parsed.families[family.name]
            if family.name == "photolala_sts_credentials_expires_in_seconds" && s.credentials.expiresAt == nil {
                #expect(f == nil, "no credentials, no time left")
                continue
            }
            if family.name == "photolala_upload_bandwidth_limit_bytes" && s.bandwidth.limit == nil {
                #expect(f == nil, "no limit, no figure")
                continue
            }
            #expect(f?.type == "gauge", "\(family.name)")
            #expect(f?.help == family.help)
        }
        #expect(parsed.current("photolala_state", label: "state") == s.state.rawValue)
        #expect(parsed.current("photolala_paused", label: "reason") == s.pauseReason?.rawValue)
        #expect(parsed.current("photolala_apple_credential_state", label: "state") == s.appleCredential.state.rawValue)
        #expect(parsed.current("photolala_sts_credentials_state", label: "state") == s.credentials.state.rawValue)
        #expect(parsed.current("photolala_catalog_state", label: "state") == s.catalog.state.rawValue)
        #expect(parsed.value("photolala_signed_in") == (s.account.signedIn ? 1 : 0))
        // No user id, path, pairing code or error text: labels are words the code chose.
        for secret in [Self.userId, Self.folder, "/srv/photos", "WDJB-MJHT", "/mnt/usb", "queue.db", "answered", "timed out"] {
            #expect(!text.contains(secret), "\(secret) leaked into the metrics")
        }
        #expect(parsed.order == parsed.order.sorted(), "families by name")
    }

    @Test("the numbers are the snapshot's")
    func numbersAreTheSnapshots() throws {
        let s = Self.laterStages
        let (_, m) = try Self.read(s)
        for (state, n) in [("pending", 12), ("hashing", 1), ("uploading", 3), ("uploaded", 58113), ("failed", 2)] {
            #expect(m.value("photolala_files", ["state": state]) == Double(n))
        }
        #expect(m.value("photolala_files_bytes", ["state": "pending"]) == 81_234_567)
        #expect(m.value("photolala_files_bytes", ["state": "uploaded"]) == 912_345_678_901)
        #expect(m.value("photolala_oldest_pending_file_age_seconds") == 90)
        #expect(m.value("photolala_last_upload_timestamp_seconds") == Self.now.timeIntervalSince1970 - 2)
        #expect(m.value("photolala_start_time_seconds") == Self.now.timeIntervalSince1970 - 3600)
        #expect(m.value("photolala_sts_credentials_expires_in_seconds") == 2700)
        #expect(m.value("photolala_apple_credential_checked_timestamp_seconds") == Self.now.timeIntervalSince1970 - 600)
        #expect(m.value("photolala_watched_folders") == 1)
        #expect(m.value("photolala_watched_directories") == 812)
        #expect(m.value("photolala_last_scan_timestamp_seconds") == Self.now.timeIntervalSince1970 - 60)
        #expect(m.value("photolala_catalog_rows") == 58113)
        #expect(m.value("photolala_catalog_published_timestamp_seconds") == Self.now.timeIntervalSince1970 - 300)
        #expect(m.value("photolala_thumbnails", ["state": "done"]) == 58001)
        #expect(m.value("photolala_thumbnails", ["state": "failed"]) == 2)
        #expect(m.value("photolala_inventory_objects") == 60212)
        #expect(m.value("photolala_verify_objects", ["result": "missing"]) == 3)
        #expect(m.value("photolala_verify_objects", ["result": "mismatched"]) == 1)
        #expect(m.value("photolala_build_info", ["version": PhotolalaVersion.current]) == 1)
    }

    @Test("trouble shows: S3 outage, expired credentials, the watch limit, missing folders, problems")
    func troubleShows() throws {
        let (_, m) = try Self.read(Self.outage)
        #expect(m.value("photolala_s3_outage") == 1)
        #expect(m.value("photolala_s3_consecutive_failures") == 4)
        #expect(m.value("photolala_sts_credentials_expires_in_seconds") == -5)
        #expect(m.value("photolala_watch_limit_reached") == 1)
        #expect(m.value("photolala_unwatched_directories") == 300)
        #expect(m.value("photolala_missing_folders") == 1)
        #expect(m.value("photolala_problems") == 1)
    }

    @Test("nothing yet is 0, not absent: an alert on `time() - x` still has a series")
    func nothingYetIsZero() throws {
        let (_, m) = try Self.read(Self.base(.starting))
        for name in ["photolala_last_upload_timestamp_seconds", "photolala_oldest_pending_file_age_seconds",
                     "photolala_catalog_published_timestamp_seconds", "photolala_verify_checked_timestamp_seconds",
                     "photolala_inventory_listed_timestamp_seconds", "photolala_apple_credential_checked_timestamp_seconds",
                     "photolala_s3_outage"] {
            #expect(m.value(name) == 0, "\(name)")
        }
        #expect(m.current("photolala_paused", label: "reason") == nil)
    }

    @Test("counters come from the registry the parts count into, with their help")
    func countersFromTheParts() throws {
        let counters = CatalogMetricsFactory()
        counters.seed()
        DaemonCounter.s3Requests.increment("PutObject", "2xx", factory: counters)
        DaemonCounter.s3Requests.increment("HeadObject", "4xx", factory: counters)
        DaemonCounter.s3ForbiddenResponses.increment("HeadObject", factory: counters)
        DaemonCounter.uploadedFiles.increment(by: 3, factory: counters)
        DaemonCounter.backendRequests.increment("/api/v1/auth/sts-token", "200", factory: counters)
        let (text, m) = try Self.read(Self.uploading, counters: counters)
        #expect(m.value("photolala_s3_requests_total", ["operation": "PutObject", "status_class": "2xx"]) == 1)
        #expect(m.value("photolala_s3_forbidden_responses_total", ["operation": "HeadObject"]) == 1)
        #expect(m.value("photolala_uploaded_files_total") == 3)
        #expect(m.value("photolala_backend_requests_total", ["endpoint": "/api/v1/auth/sts-token", "status": "200"]) == 1)
        // Seeded: there from the first scrape, at 0.
        #expect(m.value("photolala_sts_credential_failures_total") == 0)
        #expect(m.value("photolala_apple_credential_checks_total", ["result": "revoked"]) == 0)
        for counter in DaemonCounter.allCases where !counter.knownLabelValues.isEmpty {
            #expect(m.families[counter.name]?.type == "counter", "\(counter.name)")
            #expect(m.families[counter.name]?.help == counter.help)
        }
        #expect(!text.contains("photolala_files_total"))
    }

    @Test("a metric outside the catalog, or with other labels, goes nowhere")
    func outsideTheCatalogGoesNowhere() throws {
        let counters = CatalogMetricsFactory()
        Counter(label: "http_client_requests_total", dimensions: [("url", "https://x/photos/u/a.dat")], factory: counters).increment()
        Counter(label: DaemonCounter.s3Requests.name, dimensions: [("key", "photos/u/a.dat")], factory: counters).increment()
        Timer(label: "photolala_s3_latency", factory: counters).recordSeconds(1)
        let text = String(decoding: counters.registry.emitToBuffer(), as: UTF8.self)
        #expect(text.isEmpty, "\(text)")
    }

    @Test("families come out by name whatever order the registries wrote them in")
    func sortedByName() {
        let text = "# HELP b_total B\n# TYPE b_total counter\nb_total{x=\"2\"} 1\nb_total{x=\"1\"} 2\n# HELP a A\n# TYPE a gauge\na 1.0\n"
        let sorted = String(decoding: MetricsExposition.sorted(Array(text.utf8)), as: UTF8.self)
        #expect(sorted == "# HELP a A\n# TYPE a gauge\na 1.0\n# HELP b_total B\n# TYPE b_total counter\nb_total{x=\"1\"} 2\nb_total{x=\"2\"} 1\n")
    }
}
