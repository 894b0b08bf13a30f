#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore

/// Reads a file a line at a time through one fixed buffer: a snapshot of any size costs
/// `bufferSize` bytes. Lines end with `\n`; a final line without one still counts. A line
/// longer than the buffer is refused (`CatalogUnreadable`): no catalog writer makes one,
/// and holding it would be unbounded.
final class LineReader {
    private let descriptor: Int32
    private var buffer: UnsafeMutableBufferPointer<UInt8>
    private var start = 0
    private var end = 0
    private var atEnd = false
    let path: String

    init(path: String, bufferSize: Int = 256 << 10) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CatalogFileError(path: path, action: "open", errno: errno) }
        descriptor = fd
        self.path = path
        buffer = .allocate(capacity: bufferSize)
    }

    deinit {
        close(descriptor)
        buffer.deallocate()
    }

    /// The next line without its `\n`, valid until the next call; nil at the end.
    func next() throws -> UnsafeBufferPointer<UInt8>? {
        while true {
            if let newline = firstNewline() {
                let line = UnsafeBufferPointer(rebasing: buffer[start..<newline])
                start = newline + 1
                return line
            }
            if atEnd {
                guard start < end else { return nil }
                let line = UnsafeBufferPointer(rebasing: buffer[start..<end])
                start = end
                return line
            }
            try fill()
        }
    }

    private func firstNewline() -> Int? {
        guard start < end, let base = buffer.baseAddress else { return nil }
        guard let hit = memchr(base + start, 0x0A, end - start) else { return nil }
        return base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
    }

    private func fill() throws {
        if start > 0 {
            let pending = end - start
            if pending > 0, let base = buffer.baseAddress { memmove(base, base + start, pending) }
            start = 0
            end = pending
        }
        guard end < buffer.count else {
            throw CatalogUnreadable("it has a line of more than \(buffer.count / 1024) KiB, which no catalog writer makes")
        }
        let got = retryingInterrupts { read(descriptor, buffer.baseAddress! + end, buffer.count - end) }
        if got < 0 { throw CatalogFileError(path: path, action: "read", errno: errno) }
        if got == 0 { atEnd = true }
        end += got
    }
}
