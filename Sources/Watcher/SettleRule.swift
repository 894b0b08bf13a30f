import Foundation
import PhotolalaCore

/// The settle rule read from a file's modification time: a file found by a scan, a
/// roll-up or the backlog (rather than by its CLOSE_WRITE) may still be open and growing,
/// and its mtime says when it was last written. It is ready once it has been left alone
/// for `settle`. A pure value: the caller passes the time.
package struct SettleRule: Sendable, Equatable {
    package var settle: Duration

    package init(settle: Duration) {
        self.settle = settle
    }

    /// How long until a file last modified at its mtime has been left alone for `settle`;
    /// nil when it already has. An mtime in the future (a skewed clock, a touched file)
    /// proves nothing, so it counts as settled.
    package func timeLeft(mtimeSec: Int64, mtimeNsec: Int64, now: Date) -> Duration? {
        let settle = Units.seconds(settle)
        let age = Self.age(mtimeSec: mtimeSec, mtimeNsec: mtimeNsec, now: now)
        guard age >= 0, age < settle else { return nil }
        return .milliseconds(Int64(((settle - age) * 1000).rounded(.up)))
    }

    /// The instant on the aggregator's clock that a file with `timeLeft` to go would have
    /// been last written at: handing it to the aggregator then makes it due in `timeLeft`.
    package func lastWrite<Instant: InstantProtocol>(now: Instant, timeLeft: Duration) -> Instant where Instant.Duration == Duration {
        now.advanced(by: timeLeft - settle)
    }

    /// Seconds since a modification time (negative when it is in the future).
    package static func age(mtimeSec: Int64, mtimeNsec: Int64, now: Date) -> Double {
        now.timeIntervalSince1970 - (Double(mtimeSec) + Double(mtimeNsec) / 1e9)
    }
}
