#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore
import Synchronization

/// A temporary file with no name, in the daemon's state directory (0600): the export's
/// copy of the catalog and its sorted table. `O_TMPFILE` where the filesystem has it
/// (nothing to clean up after a crash); elsewhere a name made and removed at once.
/// Closed when the last reference goes.
package final class ScratchFile: Sendable {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
        init(_ description: String) {
            self.description = description
        }
    }

    private let fd: Int32
    private let end = Mutex<Int64>(0)

    /// Linux's `O_TMPFILE` (`__O_TMPFILE | O_DIRECTORY`); Glibc's module does not export it.
    private static let tmpfile: Int32 = 0o20_000_000 | O_DIRECTORY

    package init(directory: String) throws(Failure) {
        var fd = open(directory, Self.tmpfile | O_RDWR | O_CLOEXEC, 0o600)
        if fd < 0 {
            var template = Array((directory + "/.photolala-export-XXXXXX").utf8CString)
            fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
            guard fd >= 0 else { throw Failure("cannot create a temporary file in \(directory): \(errnoText(errno))") }
            template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Bytes written so far (appends go there).
    package var size: Int64 { end.withLock { $0 } }

    package func append(_ bytes: [UInt8]) throws(Failure) {
        try end.withLock { at throws(Failure) in
            try bytes.withUnsafeBytes { raw in Result { () throws(Failure) in try write(raw, at: at) } }.get()
            at += Int64(bytes.count)
        }
    }

    package func append(_ raw: UnsafeRawBufferPointer) throws(Failure) {
        try end.withLock { at throws(Failure) in
            try write(raw, at: at)
            at += Int64(raw.count)
        }
    }

    private func write(_ raw: UnsafeRawBufferPointer, at: Int64) throws(Failure) {
        var done = 0
        while done < raw.count {
            let n = retryingInterrupts { pwrite(fd, raw.baseAddress! + done, raw.count - done, off_t(at) + off_t(done)) }
            guard n > 0 else { throw Failure("cannot write a temporary file: \(errnoText(errno))") }
            done += n
        }
    }

    /// Exactly `count` bytes from `at` (fewer only at the end of the file).
    package func read(at: Int64, count: Int) throws(Failure) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = out.withUnsafeMutableBytes { raw in retryingInterrupts { pread(fd, raw.baseAddress! + done, count - done, off_t(at) + off_t(done)) } }
            guard n >= 0 else { throw Failure("cannot read a temporary file: \(errnoText(errno))") }
            if n == 0 { break }
            done += n
        }
        if done < count { out.removeLast(count - done) }
        return out
    }

    /// As many bytes as fit in `buffer` from `at`; 0 at the end.
    package func read(into buffer: inout [UInt8], at: Int64) throws(Failure) -> Int {
        let n = buffer.withUnsafeMutableBytes { raw in retryingInterrupts { pread(fd, raw.baseAddress!, raw.count, off_t(at)) } }
        guard n >= 0 else { throw Failure("cannot read a temporary file: \(errnoText(errno))") }
        return n
    }
}
