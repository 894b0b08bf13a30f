#if canImport(Glibc)
import Glibc
#endif
import Digests
import NIOCore
import PhotolalaCore
import Synchronization

/// Where a streamed GET of a snapshot goes: a file, a buffer at a time, with the MD5 of
/// what arrived taken on the way (checked against the pointer before the file is used).
/// The S3 client hands it buffers one after another; the lock only satisfies `Sendable`.
final class DownloadSink: Sendable {
    private struct State: ~Copyable {
        var descriptor: Int32
        var md5 = MD5()
        var bytes: Int64 = 0
    }

    let path: String
    private let state: Mutex<State>

    init(path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CatalogFileError(path: path, action: "create", errno: errno) }
        self.path = path
        state = Mutex(State(descriptor: fd))
    }

    deinit {
        state.withLock { s in
            if s.descriptor >= 0 { close(s.descriptor) }
        }
    }

    func write(_ buffer: ByteBuffer) throws {
        try state.withLock { (s: inout State) throws in
            try buffer.withUnsafeReadableBytes { raw in
                s.md5.update(raw)
                var offset = 0
                while offset < raw.count {
                    let wrote = retryingInterrupts { Glibc.write(s.descriptor, raw.baseAddress! + offset, raw.count - offset) }
                    if wrote < 0 { throw CatalogFileError(path: path, action: "write", errno: errno) }
                    offset += wrote
                }
            }
            s.bytes += Int64(buffer.readableBytes)
        }
    }

    /// Closes the file; the hex MD5 and the number of bytes that arrived.
    func finish() -> (md5: String, bytes: Int64) {
        state.withLock { s in
            close(s.descriptor)
            s.descriptor = -1
            return (Hex.string(s.md5.finalize()), s.bytes)
        }
    }
}
