import Foundation
import PhotolalaCore
import Testing
import Account

/// The retry numbers of both machines, now one `Backoff` each: what a change of the
/// policy must keep (or knowingly change).
@Suite struct RetryScheduleTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    /// The waits of `count` failed checks in a row, each retried when due.
    func appleCheckWaits(interval: TimeInterval, count: Int, random: Double) -> [TimeInterval] {
        var m = AppleCheckMachine(config: .init(interval: interval))
        _ = m.handle(.signedIn, now: t0)
        var now = t0
        var waits: [TimeInterval] = []
        for _ in 0..<count {
            guard case .wake(let at)? = m.handle(.checkFailed("HTTP 503"), now: now, random: random).first else { return waits }
            waits.append(at.timeIntervalSince(now))
            now = at
            _ = m.handle(.wake, now: now)
        }
        return waits
    }

    @Test func appleCheckRetriesFromThirtySecondsUpToHalfAnHour() {
        #expect(AppleCheckMachine.Config(interval: 21600).retry == Backoff(base: 30, cap: 1800, jitter: .equal))
        #expect(appleCheckWaits(interval: 21600, count: 8, random: 1) == [30, 60, 120, 240, 480, 960, 1800, 1800])
    }

    @Test func aShortAppleIntervalRetriesWithinIt() {
        // A 60 s interval (tests, impatient users): a quarter of it first, never more than it.
        #expect(appleCheckWaits(interval: 60, count: 4, random: 1) == [15, 30, 60, 60])
        #expect(appleCheckWaits(interval: 2, count: 2, random: 1) == [1, 2])
    }

    @Test func retriesAreNeverShorterThanHalfTheStep() {
        #expect(appleCheckWaits(interval: 21600, count: 3, random: 0) == [15, 30, 60])
        var m = CredentialsMachine(config: .init(refreshBeforeExpiry: 300))
        _ = m.handle(.signedIn, now: t0)
        _ = m.handle(.needed, now: t0)
        var now = t0
        var waits: [TimeInterval] = []
        for _ in 0..<4 {
            guard case .wake(let at)? = m.handle(.stsFailed(.transient("503")), now: now, random: 0).first else { break }
            waits.append(at.timeIntervalSince(now))
            now = at
            _ = m.handle(.wake, now: now)
        }
        #expect(waits == [1, 2, 4, 8])
    }

    @Test func credentialsRetryFromTwoSecondsUpToFiveMinutes() {
        #expect(CredentialsMachine.Config(refreshBeforeExpiry: 300).retry == Backoff(base: 2, cap: 300, jitter: .equal))
    }

    @Test func aSuccessfulCheckStartsTheRetriesOverFromTheBase() {
        var m = AppleCheckMachine(config: .init(interval: 3600))
        _ = m.handle(.signedIn, now: t0)
        _ = m.handle(.checkFailed("down"), now: t0, random: 1)
        _ = m.handle(.wake, now: t0.addingTimeInterval(30))
        _ = m.handle(.checkFailed("down"), now: t0.addingTimeInterval(30), random: 1)
        _ = m.handle(.wake, now: t0.addingTimeInterval(90))
        _ = m.handle(.checked(.authorized), now: t0.addingTimeInterval(90), random: 0.5)
        _ = m.handle(.wake, now: t0.addingTimeInterval(3690))
        #expect(m.handle(.checkFailed("down"), now: t0.addingTimeInterval(3690), random: 1) == [.wake(at: t0.addingTimeInterval(3720))])
    }
}
