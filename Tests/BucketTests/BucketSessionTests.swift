import BucketTesting
import Foundation
import Logging
import PhotolalaCore
import Synchronization
import Testing
import Bucket

/// The session performing the one rule against the in-memory bucket, as a stage uses it.
@Suite struct BucketSessionTests {
    let clock = TestClock(skipsWaits: true)
    let grants = FixedGrants()
    let prefix = "photos/U/"

    func session(_ bucket: InMemoryBucket) -> BucketSession {
        BucketSession(grants: grants, transport: bucket, clock: clock, logger: Logger(label: "bucket-session-tests"))
    }

    func put(_ session: BucketSession, _ key: String = "photos/U/a.dat", budget: BucketBudget = .handBack,
             observer: BucketSession.RetryObserver? = nil) async throws(S3Error) -> String {
        try await session.perform(under: prefix, budget: budget, observer: observer) { bucket throws(S3Error) in
            try await bucket.putObject(key: key, bytes: Array("hello".utf8), contentType: "text/plain")
        }
    }

    @Test func anExpiredTokenIsRefreshedOnceAndTheRequestSucceeds() async throws {
        let bucket = InMemoryBucket(clock: clock)
        let session = session(bucket)
        _ = try await put(session)
        bucket.expireTokensSeenSoFar()
        let seen = Mutex<[BucketRetryRule.Decision]>([])
        _ = try await put(session, "photos/U/b.dat") { _, decision in seen.withLock { $0.append(decision) } }
        #expect(await grants.rejections == 1)
        #expect(seen.withLock { $0 } == [.refreshGrant])
        #expect(bucket.keys == ["photos/U/a.dat", "photos/U/b.dat"])
    }

    @Test func credentialsRefusedAgainAfterARefreshComeBack() async throws {
        let bucket = InMemoryBucket(clock: clock)
        bucket.failNext(2, with: .expiredToken)
        do {
            _ = try await put(session(bucket))
            Issue.record("refused twice: the error comes back")
        } catch {
            #expect(error.kind == .credentialsExpired && error.code == "ExpiredToken")
        }
        #expect(await grants.rejections == 1)
        #expect(bucket.requests("PutObject") == 2)
    }

    @Test func aHeadsBare400IsRetriedWithFreshCredentials() async throws {
        let bucket = InMemoryBucket(clock: clock)
        bucket.failNext(1, with: .expiredToken, operations: ["HeadObject"])
        let info = try await session(bucket).perform(under: prefix) { bucket throws(S3Error) in
            try await bucket.headObject(key: "photos/U/missing.dat")
        }
        #expect(info == nil)
        #expect(await grants.rejections == 1)
        #expect(bucket.requests("HeadObject") == 2)
    }

    @Test func aSkewedClockIsCorrectedAndRemembered() async throws {
        let bucket = InMemoryBucket(clock: clock)
        bucket.skewServerClock(by: 3600)
        let session = session(bucket)
        _ = try await put(session)
        _ = try await put(session, "photos/U/b.dat")
        // One refusal, then every request signed with S3's time.
        #expect(bucket.requests("PutObject") == 3)
    }

    @Test func a503StormIsRetriedWithinTheBudgetThenHandedBack() async throws {
        let bucket = InMemoryBucket(clock: clock)
        let budget = BucketBudget(transientRetries: 4, backoff: Backoff(base: 0.5, cap: 4, jitter: .full, floor: 0.2),
                                  repeatsUnreadableAnswers: true)
        bucket.failNext(4, with: .slowDown)
        let started = clock.now()
        _ = try await put(session(bucket), budget: budget)
        #expect(bucket.requests("PutObject") == 5)
        #expect(clock.now() > started)

        bucket.failNext(5, with: .slowDown)
        do {
            _ = try await put(session(bucket), "photos/U/b.dat", budget: budget)
            Issue.record("a storm longer than the budget must come back")
        } catch {
            #expect(error.kind == .transient && error.status == 503)
        }
        bucket.failNext(1, with: .connectionReset)
        do {
            _ = try await put(session(bucket), "photos/U/c.dat")
            Issue.record("no budget: the first failure comes back")
        } catch {
            #expect(error.code == "NetworkError")
        }
    }

    @Test func noGrantMeansNothingIsSent() async throws {
        let bucket = InMemoryBucket(clock: clock)
        await grants.refuse(.paused(.quotaExceeded))
        do {
            _ = try await put(session(bucket))
            Issue.record("no grant, no request")
        } catch {
            #expect(error.kind == .unavailable && error.message.contains("quotaExceeded"))
        }
        #expect(bucket.requests("PutObject") == 0)
    }

    @Test func keysOutsideThePrefixAreRefused() async throws {
        let bucket = InMemoryBucket(clock: clock)
        do {
            _ = try await put(session(bucket), "thumbnails/U/a.jpg")
            Issue.record("outside the prefix")
        } catch {
            #expect(error.kind == .permanent && error.code == "InvalidRequest")
        }
    }
}
