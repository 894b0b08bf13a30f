/// One regular file as the scanner saw it: the identity the queue compares with the
/// database (device, inode, size, mtime with nanoseconds) without reading the file.
package struct ScannedFile: Sendable, Hashable {
    package var path: String
    package var device: UInt64
    package var inode: UInt64
    package var size: Int64
    package var mtimeSeconds: Int64
    package var mtimeNanoseconds: Int64

    package init(path: String, device: UInt64, inode: UInt64, size: Int64, mtimeSeconds: Int64, mtimeNanoseconds: Int64) {
        self.path = path
        self.device = device
        self.inode = inode
        self.size = size
        self.mtimeSeconds = mtimeSeconds
        self.mtimeNanoseconds = mtimeNanoseconds
    }
}

/// The complete listing of one directory (accepted files only, subdirectories excluded).
/// Only directories that were read to the end are reported, so the queue may treat a file
/// it knows in `path` but not in `files` as gone (`reconcileDirectory`).
package struct ScannedDirectory: Sendable, Equatable {
    package var path: String
    package var files: [ScannedFile]
}

/// A path the scanner could not read, with the system's reason.
package struct ScanProblem: Sendable, Equatable, CustomStringConvertible {
    package var path: String
    package var reason: String
    package var description: String { "\(path): \(reason)" }
}

package struct ScanSummary: Sendable, Equatable {
    package var root: String
    package var recursive: Bool
    package var files = 0
    package var directories = 0
    package var bytes: Int64 = 0
    /// Directories that could not be listed and files that could not be stat'ed. Their
    /// contents are unknown, not gone: do not sweep below them.
    package var unreadable: [ScanProblem] = []
    /// Names skipped because they are not valid UTF-8 (rendered lossily; first 100).
    package var invalidNames: [String] = []
    package var invalidNameCount = 0
    /// Every directory listed completely: what `sweepDirectories` needs after a full scan.
    package var visitedDirectories: Set<String> = []
    /// False when the root itself could not be listed: the scan says nothing at all.
    package var rootListed = false
    package var elapsed: Duration = .zero
}

/// What the asynchronous scan yields: batches of complete directory listings, then once
/// the summary.
package enum ScanOutput: Sendable {
    case directories([ScannedDirectory])
    case finished(ScanSummary)
}
