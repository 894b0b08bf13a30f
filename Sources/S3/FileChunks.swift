#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore

/// A file range as a stream of `ByteBuffer`s of `chunkSize` bytes, read when the HTTP
/// client asks for the next one, so at most a few chunks are in memory per upload.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    let file: OpenFile
    let offset: Int64
    let length: Int64
    let chunkSize: Int

    func makeAsyncIterator() -> Iterator {
        Iterator(file: file, position: offset, remaining: length, chunkSize: chunkSize)
    }

    struct Iterator: AsyncIteratorProtocol {
        let file: OpenFile
        var position: Int64
        var remaining: Int64
        let chunkSize: Int

        mutating func next() async throws -> ByteBuffer? {
            guard remaining > 0 else { return nil }
            let want = Int(Swift.min(Int64(chunkSize), remaining))
            var buffer = ByteBufferAllocator().buffer(capacity: want)
            let file = self.file
            let position = self.position
            var failure: FileReadError?
            let got = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { raw in
                do throws(FileReadError) {
                    return try file.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want]), at: position)
                } catch {
                    failure = error
                    return 0
                }
            }
            if let failure { throw failure }
            guard got == want else {
                throw FileReadError(description: "\(file.path) shrank during the upload: it changed since it was hashed")
            }
            #if os(Linux)
            // Uploaded bytes are not read again soon: keep a big video from flushing the page cache.
            if file.size > 64 << 20 { _ = posix_fadvise(file.descriptor, off_t(position), off_t(got), POSIX_FADV_DONTNEED) }
            #endif
            self.position += Int64(got)
            remaining -= Int64(got)
            return buffer
        }
    }
}
