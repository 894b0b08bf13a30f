import PhotolalaCore

/// What the watcher, the aggregator and the scanner need from `[watch]`, already validated
/// by the config module. Paths are `String`s; see `PathFilter` for why and what happens to
/// names that are not valid UTF-8.
package struct WatcherOptions: Sendable, Equatable {
    /// Absolute roots, watched recursively. Trailing slashes are dropped; a root inside
    /// another root is ignored (with a warning) because one inode can carry one watch only.
    package var folders: [String]
    /// Lower-case extensions without the dot. Empty means every extension.
    package var extensions: Set<String>
    /// Extra name globs (fnmatch, case-sensitive), matched against single names at any depth.
    package var exclude: [String]
    /// Follow symlinks found inside the folders. The folders themselves are always
    /// followed, as `find -H` does: naming a link in the config is asking for its target.
    package var followSymlinks: Bool
    /// Quiet time after a file's last event before it is handed on.
    package var settle: Duration
    /// A file that keeps changing is handed on anyway this long after its first event;
    /// the hasher's stat before/after then decides whether it was stable.
    package var maxHold: Duration
    /// More pending files than this in one directory become one scan of that directory.
    package var rollUpThreshold: Int
    /// Retry schedule for a folder that is missing or unreadable (a volume not yet mounted).
    package var missingFolderRetry: Backoff
    /// Rescan (and re-watch) schedule for directories left unwatched by the watch limit;
    /// its base is the interval the log line names.
    package var unwatchedRescan: Backoff
    /// How long a MOVED_FROM waits for its MOVED_TO before it counts as "left the tree".
    /// The kernel queues both within one rename(2), so this only covers a pair split
    /// across two reads; it is short because an unpaired move delays its removal event.
    package var movePairingWindow: Duration

    package static let defaultExtensions: Set<String> = [
        "jpg", "jpeg", "heic", "heif", "png", "tif", "tiff", "gif", "webp",
        "dng", "cr2", "cr3", "nef", "arw", "orf", "raf", "rw2", "mov", "mp4",
    ]

    package init(
        folders: [String],
        extensions: Set<String> = WatcherOptions.defaultExtensions,
        exclude: [String] = [],
        followSymlinks: Bool = false,
        settle: Duration = .seconds(5),
        maxHold: Duration? = nil,
        rollUpThreshold: Int = 128,
        missingFolderRetry: Backoff = Backoff(base: 1, cap: 300, jitter: .none),
        unwatchedRescan: Backoff = Backoff(base: 60, cap: 1800, jitter: .none),
        movePairingWindow: Duration = .milliseconds(20)
    ) {
        self.folders = folders
        self.extensions = Set(extensions.map { $0.lowercased() })
        self.exclude = exclude
        self.followSymlinks = followSymlinks
        self.settle = settle
        // Syncthing holds a busy path at most a few delays; twelve settles (a minute at the
        // default 5 s) lets a slow camera import finish without starving the queue.
        self.maxHold = maxHold ?? settle * 12
        self.rollUpThreshold = max(1, rollUpThreshold)
        self.missingFolderRetry = missingFolderRetry
        self.unwatchedRescan = unwatchedRescan
        self.movePairingWindow = movePairingWindow
    }
}
