/// Bytes of object ranges held in memory at once, across every restore: a range is
/// fetched only once its bytes fit, so the daemon's memory stays bounded however many
/// big videos are being read in parallel. First come, first served.
actor ByteBudget {
    let capacity: Int64
    private var used: Int64 = 0
    private var waiters: [(bytes: Int64, continuation: CheckedContinuation<Void, Never>)] = []

    init(capacity: Int64) {
        self.capacity = max(1, capacity)
    }

    /// Waits until `bytes` (at most the whole capacity) fit; returns what was taken.
    func acquire(_ bytes: Int64) async -> Int64 {
        let n = min(max(0, bytes), capacity)
        if waiters.isEmpty && used + n <= capacity {
            used += n
            return n
        }
        await withCheckedContinuation { waiters.append((n, $0)) }
        return n
    }

    func release(_ bytes: Int64) {
        used = max(0, used - bytes)
        while let first = waiters.first, used + first.bytes <= capacity {
            used += first.bytes
            waiters.removeFirst()
            first.continuation.resume()
        }
    }

    var inUse: Int64 { used }
}
