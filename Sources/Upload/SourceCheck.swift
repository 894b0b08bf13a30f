#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Digests
import PhotolalaCore
import Queue

/// What a file that could not be sent as hashed is now. Gone, or no longer a regular file
/// (a FIFO or a link swapped in): it leaves the queue. Another file than the one hashed
/// (rewritten, truncated — even while its body was on the wire): it is read again. Only
/// the very file that was hashed, unreadable (EACCES, EIO), is `failed` — a file an editor
/// is re-saving must not need `photolalactl retry`.
package struct SourceCheck: Sendable {
    var followSymlinks: Bool

    package init(followSymlinks: Bool) {
        self.followSymlinks = followSymlinks
    }

    package func outcome(_ failure: VerifiedFile.Failure, _ job: UploadJob) -> UploadOutcome {
        switch failure {
        case .vanished, .notRegularFile: .sourceChanged(gone: true)
        case .changed: recheck(job, unreadable: nil)
        case .unreadable(let why): recheck(job, unreadable: "cannot read the file: \(why)")
        }
    }

    /// - Parameter why: the read error, when the file could not be read; nil when it was
    ///   read but did not hold the hashed bytes.
    package func recheck(_ job: UploadJob, unreadable why: String?) -> UploadOutcome {
        var st = stat()
        let rc = followSymlinks ? stat(job.path, &st) : lstat(job.path, &st)
        if rc != 0 {
            if errno == ENOENT || errno == ENOTDIR { return .sourceChanged(gone: true) }
            return why.map { .failed($0) } ?? .sourceChanged(gone: false)
        }
        if (st.st_mode & S_IFMT) != S_IFREG { return .sourceChanged(gone: true) }
        if FileIdentity(st) != job.identity { return .sourceChanged(gone: false) }
        return why.map { .failed($0) } ?? .sourceChanged(gone: false)
    }
}
