/// What the inotify layer reports. These are hints, not truth: each one tells the driver
/// where to look (the database plus a scan is the truth), and none of them has settled yet.
/// Every path has passed the `PathFilter` (a file's name also the extension filter).
package enum WatchEvent: Sendable, Hashable {
    /// A regular file was closed after writing, moved in from outside, or hard-linked in.
    case fileWritten(String)
    /// A regular file renamed inside the watched folders (a paired move): it holds what
    /// `from` held, so its queue state can move with it (`renameFile`); if `from` was
    /// unknown, treat `to` as `fileWritten`.
    case fileMoved(from: String, to: String)
    /// A file or a whole directory left the tree: deleted, moved out, or renamed to an
    /// excluded name. For a directory, everything below it is gone too.
    case removed(String)
    /// A directory renamed inside the watched folders: its files keep their state under
    /// the new prefix, nothing needs hashing. Later events already carry the new paths.
    case directoryMoved(from: String, to: String)
    /// Look at this directory recursively: what is on disk there may not have been evented.
    case scanNeeded(String, ScanReason)
    /// A configured folder is missing or unreadable (a volume not yet mounted, or gone).
    /// Nothing under it can be read now; pending work under it should be dropped. It is
    /// retried with backoff and reported by `.folderAvailable` when it is back.
    case folderMissing(String)
    /// A folder that was missing is watched again; a `.scanNeeded(root, .folderAvailable)`
    /// follows.
    case folderAvailable(String)
    /// inotify ran out of watches: some directories are now scanned periodically instead.
    /// Reported once per episode; the log line says how to raise the limit.
    case watchLimitReached(maxUserWatches: Int)
}

/// Why a directory needs a scan; lets the driver choose urgency (an initial scan can start
/// at once, an overflow one is better settled first) and explain itself in logs.
package enum ScanReason: String, Sendable, Hashable {
    /// A folder got its watches at start.
    case initial
    /// A directory was created in, or moved into, the tree after its watches were added:
    /// files created before the watch existed were not evented.
    case newDirectory
    /// The kernel queue overflowed: events were lost somewhere under this folder.
    case overflow
    /// A periodic scan of a part of the tree that has no watches (watch limit reached).
    case unwatched
    /// An event named a file that is not valid UTF-8: a listing of that one directory
    /// (not recursive) reports it, so status can tell the user it is not backed up.
    case invalidName
    /// A missing folder appeared, or a volume was mounted or unmounted at the folder.
    case folderAvailable

    /// Whether the scan lists the whole subtree, or only the directory itself.
    package var isRecursive: Bool { self != .invalidName }
}
