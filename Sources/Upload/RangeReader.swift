import Digests
import Dispatch
import Foundation
import PhotolalaCore

/// Reads a hashed file once, front to back, part by part, through its `VerifiedFile`:
/// each part's MD5 (its Content-MD5 and expected ETag) and optionally SHA-256 (signed
/// over plain HTTP), while a running MD5 of the whole file proves the bytes still are the
/// ones the key names.
final class RangeReader: @unchecked Sendable {
    // @unchecked: one upload reads its parts in order, one `next` at a time; the buffer
    // and the running MD5 are never touched from two threads at once.

    struct PartDigest: Sendable {
        var md5Hex: String
        var contentMD5: String
        var sha256Hex: String?
    }

    /// Why the file could not be read as hashed: `VerifiedFile`'s one error.
    typealias Failure = VerifiedFile.Failure

    private let file: VerifiedFile
    private let buffer: UnsafeMutableRawBufferPointer
    private var whole = MD5()
    private var position: Int64 = 0

    var identity: FileIdentity { file.identity }

    /// Opens the file and checks it is still the one that was hashed (a FIFO, device or
    /// link swapped in is `.changed`; links are followed only when the watcher follows them).
    init(path: String, expected: FileIdentity, followSymlinks: Bool = false) throws(Failure) {
        file = try VerifiedFile(path: path, expected: expected, followSymlinks: followSymlinks)
        buffer = .allocate(byteCount: 1 << 20, alignment: 4096)
        file.advise(.sequential)
    }

    deinit {
        buffer.deallocate()
    }

    /// Digests the next `length` bytes (parts must be read in order).
    /// `md5: false` skips both this part's MD5 and the whole-file MD5 (a single PUT whose
    /// Content-MD5 is the hashed MD5 already; the identity check covers the rest).
    func next(length: Int64, sha256 wantSHA: Bool, md5 wantMD5: Bool = true) throws(Failure) -> PartDigest {
        var md5 = MD5()
        var sha = SHA256()
        var remaining = length
        while remaining > 0 {
            let want = Int(min(Int64(buffer.count), remaining))
            let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: position)
            // The end before `length`: shorter than it was hashed.
            if n == 0 { throw .changed }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            if wantMD5 {
                md5.update(chunk)
                whole.update(chunk)
            }
            if wantSHA { sha.update(chunk) }
            position += Int64(n)
            remaining -= Int64(n)
        }
        let digest = md5.finish()
        return PartDigest(md5Hex: Hex.string(digest), contentMD5: Data(digest).base64EncodedString(),
                          sha256Hex: wantSHA ? Hex.string(sha.finish()) : nil)
    }

    /// After the last part: the whole file's MD5, and whether the file is unchanged since
    /// opening (by its descriptor and by its path).
    func finish(path: String) -> (md5: String, unchanged: Bool) {
        (Hex.string(whole.finalize()), file.isUnchanged)
    }
}

/// Runs blocking file reads on a utility queue, off Swift's small cooperative pool.
enum BlockingIO {
    static let queue = DispatchQueue(label: "photolala.upload.io", qos: .utility, attributes: .concurrent)

    static func run<T: Sendable, E: Error>(_ work: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { c in
            queue.async {
                do throws(E) { c.resume(returning: .success(try work())) } catch { c.resume(returning: .failure(error)) }
            }
        }
        return try result.get()
    }
}
