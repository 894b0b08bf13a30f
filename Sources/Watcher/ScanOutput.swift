/// One regular file as the scanner saw it: the identity the queue compares with the
/// database (device, inode, size, mtime with nanoseconds) without reading the file.
public struct ScannedFile: Sendable, Hashable {
    public var path: String
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    public var mtimeSeconds: Int64
    public var mtimeNanoseconds: Int64

    public init(path: String, device: UInt64, inode: UInt64, size: Int64, mtimeSeconds: Int64, mtimeNanoseconds: Int64) {
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
public struct ScannedDirectory: Sendable, Equatable {
    public var path: String
    public var files: [ScannedFile]
}

/// A path the scanner could not read, with the system's reason.
public struct ScanProblem: Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var description: String { "\(path): \(reason)" }
}

public struct ScanSummary: Sendable, Equatable {
    public var root: String
    public var recursive: Bool
    public var files = 0
    public var directories = 0
    public var bytes: Int64 = 0
    /// Directories that could not be listed and files that could not be stat'ed. Their
    /// contents are unknown, not gone: do not sweep below them.
    public var unreadable: [ScanProblem] = []
    /// Names skipped because they are not valid UTF-8 (rendered lossily; first 100).
    public var invalidNames: [String] = []
    public var invalidNameCount = 0
    /// Every directory listed completely: what `sweepDirectories` needs after a full scan.
    public var visitedDirectories: Set<String> = []
    /// False when the root itself could not be listed: the scan says nothing at all.
    public var rootListed = false
    public var elapsed: Duration = .zero
}

/// What the asynchronous scan yields: batches of complete directory listings, then once
/// the summary.
public enum ScanOutput: Sendable {
    case directories([ScannedDirectory])
    case finished(ScanSummary)
}
