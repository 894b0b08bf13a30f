import Foundation
import Synchronization

/// Bytes hashed per second over the last few seconds, for `queue.hashRate`.
public final class HashMeter: Sendable {
    private let samples = Mutex<[(Date, Int64)]>([])

    public func add(_ bytes: Int64, at now: Date = Date()) {
        samples.withLock { s in
            s.append((now, bytes))
            if s.count > 4096 { s.removeFirst(s.count - 4096) }
            s.removeAll { now.timeIntervalSince($0.0) > 10 }
        }
    }

    public func rate(now: Date = Date()) -> Double {
        samples.withLock { s in
            s.removeAll { now.timeIntervalSince($0.0) > 10 }
            guard let first = s.first else { return 0 }
            return Double(s.reduce(0) { $0 + $1.1 }) / max(1, now.timeIntervalSince(first.0))
        }
    }
}
