#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Digests
import Foundation
import PhotolalaCore

/// Why a file body could not be read; becomes an `S3Error` of kind `.localFile`.
package struct FileReadError: Error, Sendable, CustomStringConvertible {
    package var description: String
}

/// An open file descriptor shared by the request and its body stream. Closing in
/// `deinit` rather than when `execute` returns matters: the HTTP client may still be
/// pulling body chunks after an early answer, and a descriptor closed (and reused) under
/// it would send another file's bytes.
package final class OpenFile: @unchecked Sendable {
    // Only `pread`, which takes an explicit offset, touches the descriptor: no shared position.
    package let descriptor: Int32
    package let size: Int64
    package let path: String

    /// O_NONBLOCK: what is at `path` may have been swapped for a FIFO since it was hashed,
    /// and a blocking open of a FIFO waits for a writer forever (an upload worker, then the
    /// daemon's shutdown, held with it). `expected`: refuse any other file than the hashed one.
    package init(path: String, operation: String, key: String?, expected: FileIdentity? = nil,
         followSymlinks: Bool = true) throws(S3Error) {
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (followSymlinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else {
            let code = errno
            let why = switch code {
            case ENOENT, ENOTDIR: "the file disappeared before it was uploaded"
            case EACCES, EPERM: "permission denied: the daemon's user cannot read it"
            case ELOOP: "it is a symbolic link now: it changed since it was hashed"
            default: "cannot open: \(String(cString: strerror(code)))"
            }
            throw S3Error(kind: .localFile, code: "LocalFileError", message: "\(path): \(why)",
                          operation: operation, key: key)
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw S3Error(kind: .localFile, code: "LocalFileError", message: "\(path) is not a regular file",
                          operation: operation, key: key)
        }
        if let expected, FileIdentity(info) != expected {
            close(fd)
            throw S3Error(kind: .localFile, code: "LocalFileError",
                          message: "\(path) is another file than the one hashed: it changed since it was hashed",
                          operation: operation, key: key)
        }
        descriptor = fd
        size = Int64(info.st_size)
    }

    deinit { close(descriptor) }

    /// The length to send, checked against the file's size at open.
    package func checkRange(offset: Int64, length: Int64?, operation: String, key: String?) throws(S3Error) -> Int64 {
        let length = length ?? (size - offset)
        guard offset >= 0, length >= 0, offset + length <= size else {
            throw S3Error(kind: .localFile, code: "LocalFileError",
                          message: "\(path) is \(size) bytes, too short for \(length) bytes at offset \(offset): "
                              + "it changed since it was hashed", operation: operation, key: key)
        }
        return length
    }

    /// Fills `buffer` from `offset`; fewer bytes than asked only at end of file.
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileReadError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset + Int64(done)))
            if n < 0 {
                if errno == EINTR { continue }
                throw FileReadError(description: "\(path): read failed: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    func digest(offset: Int64, length: Int64, md5: Bool, sha256: Bool, chunkSize: Int,
                operation: String, key: String?) throws(S3Error) -> S3Client.RangeDigest {
        var md5Hash = MD5()
        var shaHash = SHA256()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var position = offset
        var remaining = length
        while remaining > 0 {
            let want = Int(min(Int64(chunkSize), remaining))
            let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want])
            let got: Int
            do { got = try read(into: slice, at: position) } catch {
                throw S3Error(kind: .localFile, code: "LocalFileError", message: error.description,
                              operation: operation, key: key)
            }
            guard got == want else {
                throw S3Error(kind: .localFile, code: "LocalFileError",
                              message: "\(path) shrank while it was read: it changed since it was hashed",
                              operation: operation, key: key)
            }
            let bytes = UnsafeRawBufferPointer(slice)
            if md5 { md5Hash.update(bytes) }
            if sha256 { shaHash.update(bytes) }
            position += Int64(got)
            remaining -= Int64(got)
        }
        let md5Bytes = md5Hash.finish()
        return S3Client.RangeDigest(md5Hex: md5 ? Hex.string(md5Bytes) : "",
                                    contentMD5: md5 ? Data(md5Bytes).base64EncodedString() : "",
                                    sha256Hex: sha256 ? shaHash.finishHex() : nil)
    }
}
