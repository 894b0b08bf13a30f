import Foundation

/// The daemon's one retry schedule: exponential steps from `base` doubling up to `cap`,
/// with a jitter, counting failures until `reset()`. Every retry in the daemon (objects,
/// requests, S3 outages, credentials, the Apple check, lost queue writes, missing folders)
/// is one of these with its own numbers, so a change of the rule is one file.
///
/// A pure value: the caller passes the random draw (0..<1), so tests use plain numbers.
package struct Backoff: Sendable, Equatable {
    package enum Jitter: Sendable, Equatable {
        /// Exactly the step: timers a person reads ("retrying in 5 minutes").
        case none
        /// Anywhere in 0...step (AWS's "full jitter"): many clients spread out the most.
        case full
        /// Between half the step and the step: spread out, but never a tight loop.
        case equal
    }

    package var base: TimeInterval
    package var cap: TimeInterval
    package var jitter: Jitter
    /// Never shorter than this, whatever the jitter drew.
    package var floor: TimeInterval
    /// Failures since the last `reset()`.
    package private(set) var failures = 0

    package init(base: TimeInterval, cap: TimeInterval, jitter: Jitter = .equal, floor: TimeInterval = 0) {
        self.base = base
        self.cap = max(base, cap)
        self.jitter = jitter
        self.floor = floor
    }

    /// The step after `failures` failures (1 for the first), before jitter.
    package func step(after failures: Int) -> TimeInterval {
        guard failures > 0 else { return 0 }
        // 2^62 overflows nothing in Double, but keep the exponent small enough to stay exact.
        return min(cap, base * pow(2, Double(min(failures - 1, 62))))
    }

    /// The wait after `failures` failures for a random draw in 0..<1.
    package func delay(after failures: Int, random: Double) -> TimeInterval {
        let step = step(after: failures)
        let drawn: TimeInterval = switch jitter {
        case .none: step
        case .full: step * random
        case .equal: step * (0.5 + random / 2)
        }
        return max(floor, drawn)
    }

    /// A failure: counts it and answers how long to wait before the next try.
    package mutating func fail(random: Double) -> TimeInterval {
        failures += 1
        return delay(after: failures, random: random)
    }

    /// A success: the next failure starts from `base` again.
    package mutating func reset() {
        failures = 0
    }

    /// A failure, the wait as a `Duration` (the watcher's timers run on `ContinuousClock`).
    package mutating func failDuration(random: Double = .random(in: 0..<1)) -> Duration {
        Self.duration(fail(random: random))
    }

    /// The wait as a `Duration` (the watcher's timers run on `ContinuousClock`).
    package static func duration(_ seconds: TimeInterval) -> Duration {
        .milliseconds(Int64((seconds * 1000).rounded()))
    }
}
