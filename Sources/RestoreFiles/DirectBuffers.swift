#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The aligned buffers an `IncomingFile` gathers a body in before writing it past the page
/// cache (`O_DIRECT`), kept for the next file: a fresh megabyte is 256 page faults, and on
/// a virtual machine each first touch of a page may cost the host a fault of its own —
/// the very cost the direct writes are there to avoid (docs/benchmarks.md, "The mirror's
/// writes past the page cache"). At most `limit` are kept; the mirror drops them when its
/// pull ends.
package final class DirectBuffers: Sendable {
    package static let shared = DirectBuffers(size: 1 << 20, limit: 8)

    /// What `O_DIRECT` asks of a buffer's address, a write's length and its offset on
    /// every filesystem and disk Linux has (the logical block size is at most a page).
    static let alignment = 4096

    /// One buffer's bytes (`size` of them, aligned): used by one file at a time.
    struct Block: @unchecked Sendable {
        let base: UnsafeMutableRawPointer
    }

    package let size: Int
    private let limit: Int
    private let free = Mutex<[Block]>([])

    package init(size: Int, limit: Int) {
        precondition(size > 0 && size % Self.alignment == 0, "a direct buffer is a whole number of pages")
        self.size = size
        self.limit = limit
    }

    deinit {
        drop()
    }

    /// Buffers kept now.
    package var kept: Int { free.withLock { $0.count } }

    /// A kept buffer, or a new one (nil: no memory for one; the file is then written
    /// through the page cache).
    func take() -> Block? {
        if let kept = free.withLock({ $0.popLast() }) { return kept }
        var raw: UnsafeMutableRawPointer?
        guard posix_memalign(&raw, Self.alignment, size) == 0, let raw else { return nil }
        return Block(base: raw)
    }

    /// `block` back for another file, or freed when enough are kept.
    func give(_ block: Block) {
        let keep = free.withLock { free -> Bool in
            guard free.count < limit else { return false }
            free.append(block)
            return true
        }
        if !keep { Glibc.free(block.base) }
    }

    /// Frees every kept buffer.
    package func drop() {
        for block in free.withLock({ f -> [Block] in defer { f.removeAll() }; return f }) { Glibc.free(block.base) }
    }
}
