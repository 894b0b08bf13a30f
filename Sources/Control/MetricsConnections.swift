import Synchronization

/// Connections the metrics listener is answering: past the cap a new one is answered
/// 503 at once, before anything is rendered for it.
final class MetricsConnections: Sendable {
    private let open = Mutex(0)
    let cap: Int

    init(cap: Int) { self.cap = cap }

    func tryAcquire() -> Bool {
        open.withLock { n in
            guard n < cap else { return false }
            n += 1
            return true
        }
    }

    func release() { open.withLock { $0 -= 1 } }
}
