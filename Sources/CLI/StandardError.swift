#if canImport(Glibc)
import Glibc
#endif

/// Writes to stderr with write(2): the C global `stderr` is not concurrency-safe in Swift 6.
enum StandardError {
    static func print(_ line: String) {
        var bytes = Array((line + "\n").utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = write(2, raw.baseAddress! + offset, raw.count - offset)
                if n <= 0 { if errno == EINTR { continue }; return }
                offset += n
            }
        }
    }
}
