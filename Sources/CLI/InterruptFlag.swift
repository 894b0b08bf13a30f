#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// Turns Ctrl-C into a flag the polling loop checks, so the daemon is told to stop pairing.
final class InterruptFlag {
    private let source: DispatchSourceSignal
    private let flag = Flag()

    init() {
        signal(SIGINT, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        let flag = self.flag
        source.setEventHandler { flag.set() }
        source.resume()
    }

    var isSet: Bool { flag.value }

    /// The flag alone, for threads and `@Sendable` closures.
    var shared: Flag { flag }

    final class Flag: Sendable {
        private let state = Mutex(false)
        func set() { state.withLock { $0 = true } }
        var value: Bool { state.withLock { $0 } }
    }
}
