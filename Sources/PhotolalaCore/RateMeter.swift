import Foundation
import Synchronization

/// Bytes per second over the last few seconds, for status (hashing and upload rates, ETA).
///
/// One bucket per second of the window rather than one sample per call: a first scan
/// hashes thousands of small photos a second, and a list of samples pruned on every
/// `add` made each call cost as much as the window held (and held it all in memory).
package final class RateMeter: Sendable {
    private struct Bucket {
        /// The whole second this bucket counts (Unix time); nil when unused.
        var second: Int64?
        /// When its first bytes came, for the span of the rate.
        var first: TimeInterval = 0
        var bytes: Int64 = 0
    }

    private let buckets: Mutex<[Bucket]>
    private let window: TimeInterval

    package init(window: TimeInterval = 10) {
        self.window = window
        // One more than the window so the current, partial second never evicts the oldest full one.
        buckets = Mutex(Array(repeating: Bucket(), count: Int(window.rounded(.up)) + 1))
    }

    package func add(_ bytes: Int64, at now: Date = Date()) {
        let t = now.timeIntervalSince1970
        let second = Int64(t.rounded(.down))
        buckets.withLock { b in
            let i = Int(((second % Int64(b.count)) + Int64(b.count)) % Int64(b.count))
            if b[i].second != second { b[i] = Bucket(second: second, first: t, bytes: 0) }
            b[i].bytes += bytes
        }
    }

    package func rate(now: Date = Date()) -> Double {
        let t = now.timeIntervalSince1970
        return buckets.withLock { b in
            var total: Int64 = 0
            var first: TimeInterval?
            for bucket in b where bucket.second != nil && t - bucket.first <= window && bucket.first <= t {
                total += bucket.bytes
                first = min(first ?? bucket.first, bucket.first)
            }
            guard let first else { return 0 }
            return Double(total) / max(1, t - first)
        }
    }
}
