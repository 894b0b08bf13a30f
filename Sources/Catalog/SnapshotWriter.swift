#if canImport(Glibc)
import Glibc
#endif
import Digests
import PhotolalaCore

/// Writes the next snapshot to a file through one fixed buffer, taking the MD5 of its
/// bytes on the way (the snapshot's name, its Content-MD5 and the pointer's body).
final class SnapshotWriter {
    private let descriptor: Int32
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    private var used = 0
    private var md5 = MD5()
    private(set) var size: Int64 = 0
    let path: String

    init(path: String, bufferSize: Int = 256 << 10) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CatalogFileError(path: path, action: "create", errno: errno) }
        descriptor = fd
        self.path = path
        buffer = .allocate(capacity: bufferSize)
    }

    deinit {
        close(descriptor)
        buffer.deallocate()
    }

    /// One line; the `\n` is added.
    func line(_ bytes: UnsafeBufferPointer<UInt8>) throws {
        if used + bytes.count + 1 > buffer.count {
            try flush()
            guard bytes.count + 1 <= buffer.count else {
                throw CatalogUnreadable("a line of \(bytes.count) bytes does not fit the snapshot writer's buffer")
            }
        }
        if let source = bytes.baseAddress { (buffer.baseAddress! + used).update(from: source, count: bytes.count) }
        used += bytes.count
        buffer[used] = 0x0A
        used += 1
    }

    func line(_ text: String) throws {
        var text = text
        try text.withUTF8 { try line($0) }
    }

    /// Everything written and synced: the hex MD5 of the file's bytes.
    func finish() throws -> String {
        try flush()
        // The snapshot is uploaded from this file next; synced, so what S3 gets is what
        // the MD5 was taken of even if the machine stops in between.
        guard fsync(descriptor) == 0 else { throw CatalogFileError(path: path, action: "sync", errno: errno) }
        return Hex.string(md5.finalize())
    }

    private func flush() throws {
        guard used > 0 else { return }
        let bytes = UnsafeRawBufferPointer(start: buffer.baseAddress, count: used)
        md5.update(bytes)
        var offset = 0
        while offset < bytes.count {
            let wrote = retryingInterrupts { write(descriptor, bytes.baseAddress! + offset, bytes.count - offset) }
            if wrote < 0 { throw CatalogFileError(path: path, action: "write", errno: errno) }
            offset += wrote
        }
        size += Int64(used)
        used = 0
    }
}
