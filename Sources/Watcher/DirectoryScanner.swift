#if canImport(Glibc)
import Glibc
#endif
import Logging
import PhotolalaCore

/// A fast recursive lister: readdir's d_type decides what needs a stat, names are filtered
/// before any stat, and only accepted files are stat'ed (fstatat relative to the open
/// directory, so the kernel does not walk the full path again). Symlinks are followed only
/// when asked, and every directory is entered once by (device, inode), which also stops
/// loops through bind mounts. FIFOs, sockets and devices are skipped; unreadable
/// directories are reported and the walk goes on.
package struct DirectoryScanner: Sendable {
    package let filter: PathFilter
    package let followSymlinks: Bool
    package let batchSize: Int
    package let logger: Logger
    /// The watched folders, resolved. A followed link into one of them is not entered:
    /// what it leads to is scanned under its own path already. The per-scan (device,
    /// inode) set stops loops within one scan, but a scan of a new subdirectory does not
    /// know the rest of the tree, and a link back up (to the folder itself, say) listed
    /// the whole library again under alias paths, each file hashed a second time.
    package let coveredRoots: [String]

    package init(filter: PathFilter, followSymlinks: Bool = false, batchSize: Int = 1000, coveredRoots: [String] = [],
                logger: Logger = Logger(label: "photolala.watcher.scanner")) {
        self.filter = filter
        self.followSymlinks = followSymlinks
        self.batchSize = max(1, batchSize)
        self.coveredRoots = coveredRoots.compactMap(Self.resolved)
        self.logger = logger
    }

    package init(options: WatcherOptions, logger: Logger = Logger(label: "photolala.watcher.scanner")) {
        self.init(filter: PathFilter(options: options), followSymlinks: options.followSymlinks,
                  coveredRoots: options.folders, logger: logger)
    }

    static func resolved(_ path: String) -> String? {
        guard let r = realpath(path, nil) else { return nil }
        defer { free(r) }
        return String(validatingCString: r)
    }

    /// Whether a followed link to a directory leads into a watched folder.
    func leadsIntoCoveredRoot(_ linkPath: String) -> Bool {
        guard !coveredRoots.isEmpty, let target = Self.resolved(linkPath) else { return false }
        return coveredRoots.contains { PathNames.isWithin(target, $0) }
    }

    /// Scans on the calling thread, handing batches to `onBatch` as they fill. Blocking:
    /// call it from a thread of your own, never from the cooperative pool (use `batches`).
    package func scan(_ path: String, recursive: Bool = true,
                     onBatch: ([ScannedDirectory]) throws -> Void) rethrows -> ScanSummary {
        let cursor = ScanCursor(scanner: self, root: path, recursive: recursive)
        while let output = cursor.next() {
            switch output {
            case .directories(let batch): try onBatch(batch)
            case .finished(let summary): return summary
            }
        }
        return cursor.summary
    }

    /// Scans on a shared low-priority thread (nice 10, which also lowers its I/O
    /// priority). One batch is read ahead: while the consumer records a batch, the next
    /// one is listed on the other core (a scan took twice as long taking turns). Nothing
    /// more is read ahead, so a slow consumer costs at most one batch of memory,
    /// concurrent scans take turns batch by batch, and dropping the stream stops the scan
    /// after the batch in hand. The last element is `.finished(summary)`.
    package func batches(_ path: String, recursive: Bool = true) -> AsyncStream<ScanOutput> {
        let readAhead = ScanReadAhead(ScanCursor(scanner: self, root: path, recursive: recursive))
        return AsyncStream(unfolding: {
            if Task.isCancelled { return nil }
            return await readAhead.next()
        })
    }
}
