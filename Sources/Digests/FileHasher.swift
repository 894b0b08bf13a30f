import PhotolalaCore

/// What hashing a file produced: its MD5 and the identity it had while being read.
package struct FileDigest: Sendable, Equatable {
    package var md5: String
    package var identity: FileIdentity
    /// Hex SHA-256 of the same bytes, when asked for: the manifest records it (format 2)
    /// and a plain-HTTP upload signs it (see `PayloadDigests`).
    package var sha256: String?
    /// Its owner and mode when it was opened (the manifest records them).
    package var owner: FileOwner?
    /// From open to the last stat: what the log reports and the benchmark compares with md5sum.
    package var elapsed: Duration

    package init(md5: String, identity: FileIdentity, elapsed: Duration = .zero, sha256: String? = nil, owner: FileOwner? = nil) {
        self.md5 = md5
        self.identity = identity
        self.elapsed = elapsed
        self.sha256 = sha256
        self.owner = owner
    }
}

/// Hashes one file with a fixed buffer (memory does not grow with file size), checking
/// its identity before and after: a file that changed while it was read is not trusted.
package struct FileHasher: ~Copyable {
    /// Vanished, changed while it was read, not a regular file, or unreadable.
    package typealias Failure = VerifiedFile.Failure

    /// Large enough that syscalls cost nothing next to MD5 (a read per 0.35 ms of
    /// hashing; 32 KiB to 1 MiB measured the same), small enough to be a fixed cost per
    /// worker that the daemon's RSS does not notice.
    package static let bufferSize = 256 << 10
    private let buffer: UnsafeMutableRawBufferPointer
    /// Files above this give back the page cache *they brought in*: a file read from the
    /// disk is dropped again as it is hashed, so one big video does not push the NAS's
    /// working set out of memory. A file that was cached before we came (just copied in,
    /// being played) stays: dropping it would evict exactly the working set this
    /// protects, and send the next reader (the uploader too) to the disk.
    package var dropCacheAbove: Int64 = FileHasher.defaultDropCacheAbove
    package static let defaultDropCacheAbove: Int64 = 64 << 20

    package init() {
        buffer = .allocate(byteCount: Self.bufferSize, alignment: 4096)
    }

    deinit { buffer.deallocate() }

    /// `sha256`: also take the SHA-256 of the bytes, in the same pass.
    package func hash(path: String, followSymlinks: Bool = false, sha256 wantSHA: Bool = false) throws(Failure) -> FileDigest {
        let reader = try HashPass(path: path, followSymlinks: followSymlinks, sha256: wantSHA, dropCacheAbove: dropCacheAbove)
        var md5 = MD5()
        while true {
            let n = try reader.read(into: buffer)
            if n == 0 { break }
            md5.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
        return try reader.finish(md5: md5.finish())
    }

    /// DONTNEED drops only the folios wholly inside its range, and the page cache keeps a
    /// file in folios of up to 2 MiB (with large folios, Linux 6.x): dropping each chunk
    /// on its own dropped nothing at all. Each call covers the last 8 MiB read, so every
    /// folio lies inside one of them once the reader is past it.
    static let dropWindow: Int64 = 8 << 20
}

/// One file read front to back for hashing: opened as a `VerifiedFile` (no links followed
/// unless asked, no waiting on FIFOs), its identity checked again after the last byte,
/// the page cache it brought in given back, and (when asked) its SHA-256 taken on the way.
/// The MD5 is the caller's: one stream at a time (`FileHasher`) or many per core (`LaneHasher`).
final class HashPass {
    typealias Failure = VerifiedFile.Failure

    private let file: VerifiedFile
    private let started: ContinuousClock.Instant
    private(set) var offset: Int64 = 0
    private var sha = SHA256()
    private let wantSHA: Bool
    // Whether the file was in the page cache before we came is told by its first
    // chunk, read without waiting: it comes from the cache or not at all. Files are
    // nearly always cached whole (just copied in, being played) or not at all (old
    // ones a scan finds). One read of a cold file caches the next ones (readahead),
    // so later chunks cannot tell, and a few pages evicted meanwhile from a warm
    // file must not make us drop the rest of it: the first answer holds.
    private var probe: Bool
    /// Set when the file came from the disk: from there on its pages are ours to drop.
    private var coldFrom: Int64?

    init(path: String, followSymlinks: Bool, sha256: Bool, dropCacheAbove: Int64) throws(Failure) {
        started = .now
        file = try VerifiedFile(path: path, followSymlinks: followSymlinks)
        wantSHA = sha256
        probe = file.size > dropCacheAbove
        file.advise(.sequential)
    }

    var path: String { file.path }

    /// Reads the next bytes into `buffer`; 0 is the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(Failure) -> Int {
        var n: Int
        if probe {
            // Where the cache cannot say (an old kernel, a filesystem without
            // RWF_NOWAIT), the file counts as ours, as it always did.
            probe = false
            if let cached = file.readCached(into: buffer, at: offset) {
                n = cached
            } else {
                n = try file.read(into: buffer, at: offset)
                if n > 0 { coldFrom = offset }
            }
        } else {
            n = try file.read(into: buffer, at: offset)
        }
        if n > 0 {
            if wantSHA { sha.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) }
            offset += Int64(n)
            if let coldFrom { dropPages(from: max(coldFrom, offset - FileHasher.dropWindow), to: offset) }
        }
        return n
    }

    /// After the last read: the identity the file kept throughout, or why it cannot be trusted.
    func finish(md5: [UInt8]) throws(Failure) -> FileDigest {
        if let coldFrom {
            // The last folios, and whatever readahead brought in beyond what we read.
            dropPages(from: max(coldFrom, offset - FileHasher.dropWindow), to: nil)
        }
        try file.checkUnchanged()
        guard offset == file.size else { throw .changed }
        return FileDigest(md5: Hex.string(md5), identity: file.identity, elapsed: .now - started,
                          sha256: wantSHA ? Hex.string(sha.finalize()) : nil, owner: file.owner)
    }

    /// `to: nil` means to the end of the file.
    private func dropPages(from: Int64, to: Int64?) {
        file.advise(.dontNeed, from: from, length: to.map { $0 - from })
    }
}
