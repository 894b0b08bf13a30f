import Foundation

/// `upload.bandwidth_limit` across every uploader (and, on its own, every restore): one
/// bucket of bytes refilled at the rate, up to one second's worth. Senders take what they
/// are about to send and wait until the bucket can pay for it.
package actor TokenBucket {
    private var rate: Double?
    private var tokens: Double
    private var last: ContinuousClock.Instant

    package init(bytesPerSecond: Int64?) {
        rate = bytesPerSecond.map(Double.init)
        tokens = rate ?? 0
        last = .now
    }

    package func setRate(_ bytesPerSecond: Int64?) {
        rate = bytesPerSecond.map(Double.init)
        tokens = min(tokens, rate ?? 0)
    }

    /// Waits until `bytes` may be sent; returns at once when there is no limit.
    package func take(_ bytes: Int) async {
        guard let rate, rate > 0 else { return }
        refill(rate)
        tokens -= Double(bytes)
        if tokens < 0 {
            let wait = -tokens / rate
            try? await Task.sleep(for: .milliseconds(Int64(wait * 1000)))
        }
    }

    private func refill(_ rate: Double) {
        let now = ContinuousClock.now
        let elapsed = now - last
        last = now
        tokens = min(rate, tokens + rate * (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
    }
}
