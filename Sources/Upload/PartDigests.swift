import Digests
import Foundation

/// The uploader's one read of a multipart object's file, front to back, part by part:
/// each part's MD5 (its Content-MD5 and expected ETag) and, over plain HTTP, its SHA-256
/// (signed), while a running MD5 of the whole file proves the bytes still are the ones
/// the key names.
package final class PartDigests: @unchecked Sendable {
    // @unchecked: one upload reads its parts in order, one `next` at a time; the running
    // MD5 and the position are never touched from two threads at once.

    package struct Part: Sendable {
        package var md5Hex: String
        package var contentMD5: String
        package var sha256Hex: String?
    }

    private let file: VerifiedFile
    private var whole = MD5()
    private var position: Int64 = 0

    package init(_ file: VerifiedFile) {
        self.file = file
        file.advise(.sequential)
    }

    /// Digests the next `length` bytes (parts are read in order).
    package func next(length: Int64, sha256 wantSHA: Bool) throws(VerifiedFile.Failure) -> Part {
        var md5 = MD5()
        var sha = SHA256()
        try file.read(from: position, length: length) { chunk in
            md5.update(chunk)
            whole.update(chunk)
            if wantSHA { sha.update(chunk) }
        }
        position += length
        let digest = md5.finish()
        return Part(md5Hex: Hex.string(digest), contentMD5: Data(digest).base64EncodedString(),
                    sha256Hex: wantSHA ? sha.finishHex() : nil)
    }

    /// After the last part: the whole file's MD5, and whether the file is unchanged since
    /// opening (by its descriptor and by its path).
    package func finish() -> (md5: String, unchanged: Bool) {
        (Hex.string(whole.finalize()), file.isUnchanged)
    }
}
