import Foundation
import Synchronization

/// Bytes per second over the last few seconds, for status (hashing and upload rates, ETA).
public final class RateMeter: Sendable {
    private let samples = Mutex<[(Date, Int64)]>([])
    private let window: TimeInterval

    public init(window: TimeInterval = 10) {
        self.window = window
    }

    public func add(_ bytes: Int64, at now: Date = Date()) {
        samples.withLock { s in
            s.append((now, bytes))
            s.removeAll { now.timeIntervalSince($0.0) > window }
        }
    }

    public func rate(now: Date = Date()) -> Double {
        samples.withLock { s in
            s.removeAll { now.timeIntervalSince($0.0) > window }
            guard let first = s.first else { return 0 }
            let span = max(1, now.timeIntervalSince(first.0))
            return Double(s.reduce(0) { $0 + $1.1 }) / span
        }
    }
}
