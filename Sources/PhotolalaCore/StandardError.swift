#if canImport(Glibc)
import Glibc
#endif

/// Writes to stderr with write(2): the C global `stderr` is not concurrency-safe in Swift 6.
package enum StandardError {
    /// One line, in one write(2) as far as the kernel allows: lines from many tasks never interleave.
    package static func print(_ line: String) {
        write(line + "\n")
    }

    package static func write(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = retryingInterrupts { Glibc.write(2, raw.baseAddress! + offset, raw.count - offset) }
                if n <= 0 { return }
                offset += n
            }
        }
    }
}
