import Synchronization

/// True the first time only.
final class Flag: Sendable {
    private let state = Mutex(true)
    func take() -> Bool {
        state.withLock { value in
            defer { value = false }
            return value
        }
    }
}

final class Counter: Sendable {
    private let state = Mutex(0)
    func next() -> Int { state.withLock { $0 += 1; return $0 } }
}
