#if canImport(Glibc)
import Glibc
#endif

/// The trail's files in `directory` (`audit.log`, `.1`, `.2`), as the service reads them at
/// start and for its queries: what they hold, with no state of their own. The service
/// alone writes them.
struct AuditFiles {
    let directory: String
    /// `audit.max_size`: how far a file is read.
    let maxSize: Int64

    func path(_ generation: Int) -> String {
        "\(directory)/\(AuditTrail.name(generation))"
    }

    /// A last line without its newline was being written when the process or the power
    /// went: never sealed, it is cut off so the next record starts on a line of its own.
    /// Answers how many bytes went (nil: none).
    func dropUnfinishedRecord() -> Int64? {
        let fd = open(path(0), O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { _ = Glibc.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_size > 0 else { return nil }
        let fileSize = Int64(st.st_size)
        let window = min(fileSize, Int64(AuditTrail.tailWindow))
        var tail = [UInt8](repeating: 0, count: Int(window))
        guard pread(fd, &tail, tail.count, off_t(fileSize - window)) == tail.count, tail.last != UInt8(ascii: "\n") else { return nil }
        guard let newline = tail.lastIndex(of: UInt8(ascii: "\n")) ?? (window == fileSize ? -1 : nil) else { return nil }
        let keep = fileSize - window + Int64(newline) + 1
        guard ftruncate(fd, off_t(keep)) == 0 else { return nil }
        _ = fsync(fd)
        return fileSize - keep
    }

    /// The newest line of the trail: its hash, and its number if it is a record.
    func lastLine() -> (seq: Int64?, hash: String)? {
        for file in 0...2 {
            guard let bytes = read(path(file), last: AuditTrail.tailWindow), let line = AuditChain.lines(of: bytes).last, !line.isEmpty else { continue }
            return (AuditLine.head(line)?.seq, AuditLine.hash(line))
        }
        return nil
    }

    func oldestFirstRecord() -> (seq: Int64, prev: String)? {
        for file in [2, 1, 0] where access(path(file), F_OK) == 0 {
            return firstRecord(path(file))
        }
        return nil
    }

    func firstRecord(_ path: String) -> (seq: Int64, prev: String)? {
        guard let bytes = read(path, first: AuditTrail.tailWindow), let line = AuditChain.lines(of: bytes).first else { return nil }
        return AuditLine.head(line)
    }

    /// Whether the records after `seal` in the files follow it, each chained to the one before.
    func chainsForward(from seal: AuditMark) -> Bool {
        var newer: (seq: Int64, prev: String)?
        for file in 0...2 {
            guard let bytes = read(path(file)) else { continue }
            for line in AuditChain.lines(of: bytes).reversed() {
                guard let head = AuditLine.head(line) else { return false }
                let hash = AuditLine.hash(line)
                if let newer, newer.seq != head.seq + 1 || newer.prev != hash { return false }
                if head.seq <= seal.seq { return head.seq == seal.seq && hash == seal.hash }
                newer = head
            }
        }
        return false
    }

    /// The whole file (`first`/`last`: only that many bytes from its start or end); nil if
    /// missing. Never more than twice `max_size` (at least 64 MiB): a file grown far past
    /// it by someone else is read only that far (its end then shows as damaged or cut).
    func read(_ path: String, first: Int? = nil, last: Int? = nil) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { _ = Glibc.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        let fileSize = Int(st.st_size)
        let count = min(fileSize, first ?? last ?? fileSize, max(64 << 20, Int(clamping: min(maxSize, 1 << 40)) * 2))
        let offset = last != nil ? fileSize - count : 0
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(offset + done)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            done += n
        }
        return Array(bytes.prefix(done))
    }

    func syncDirectory() {
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dirFD >= 0 else { return }
        _ = fsync(dirFD)
        _ = Glibc.close(dirFD)
    }
}
