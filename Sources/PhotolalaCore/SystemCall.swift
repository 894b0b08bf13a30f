#if canImport(Glibc)
import Glibc
#endif

/// Runs a system call again while a signal interrupts it (-1 with EINTR), as swift-system's
/// `retryOnInterrupt` does: every raw call that can block goes through here, so no caller
/// writes its own loop. Any other result, failures included, is returned as is, with errno.
@inlinable
package func retryingInterrupts<Result: BinaryInteger>(_ call: () -> Result) -> Result {
    while true {
        let result = call()
        if result >= 0 || errno != EINTR { return result }
    }
}

/// The system's sentence for an errno, for log lines and the errors users read.
package func errnoText(_ code: Int32) -> String {
    String(cString: strerror(code))
}
