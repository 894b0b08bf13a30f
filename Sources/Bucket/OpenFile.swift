import Digests
import Foundation
import PhotolalaCore

/// Why a file body could not be read; becomes an `S3Error` of kind `.localFile`.
package struct FileReadError: Error, Sendable, CustomStringConvertible {
    package var description: String
}

/// A file a request's body is read from: the `VerifiedFile` (opened once, checked to be
/// the one hashed when an identity is expected) shared by the request and its body
/// stream, with what an S3 request needs of it: its failures as `S3Error`s (`.localFile`),
/// the range to send, and its digests. Closing when the last reference goes rather than
/// when `execute` returns matters: the HTTP client may still be pulling body chunks after
/// an early answer, and a descriptor closed (and reused) under it would send another
/// file's bytes.
package final class OpenFile: Sendable {
    private let file: VerifiedFile

    package var descriptor: Int32 { file.descriptor }
    package var size: Int64 { file.size }
    package var path: String { file.path }

    /// `expected`: refuse any other file than the hashed one. A FIFO swapped in at `path`
    /// does not hold a worker: `VerifiedFile` opens without blocking.
    package init(path: String, operation: String, key: String?, expected: FileIdentity? = nil,
                 followSymlinks: Bool = true) throws(S3Error) {
        do {
            file = try VerifiedFile(path: path, expected: expected, followSymlinks: followSymlinks)
        } catch {
            let why = switch error {
            case .vanished: "\(path): the file disappeared before it was uploaded"
            case .changed: "\(path) is another file than the one hashed: it changed since it was hashed"
            case .notRegularFile: "\(path) is not a regular file"
            case .unreadable(let reason): "\(path): \(reason)"
            }
            throw S3Error(kind: .localFile, code: "LocalFileError", message: why, operation: operation, key: key)
        }
    }

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
        do {
            return try file.read(filling: buffer, at: offset)
        } catch {
            throw FileReadError(description: "\(path): \(error)")
        }
    }

    /// Uploaded bytes are not read again soon: keeps a big video from flushing the page cache.
    package func dropFromCache(from offset: Int64, length: Int64) {
        file.advise(.dontNeed, from: offset, length: length)
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
