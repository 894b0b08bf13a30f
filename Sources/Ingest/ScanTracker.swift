import PhotolalaCore

/// One scan to run: a folder, and whether its subfolders too.
package struct ScanRequest: Sendable, Equatable {
    var path: String
    var recursive: Bool

    package static func == (a: ScanRequest, b: ScanRequest) -> Bool {
        a.recursive == b.recursive && a.path.utf8.elementsEqual(b.path.utf8)
    }
}

/// The scans waiting and the one running, as a pure value, with what events changed
/// while it ran. A listing taken before such a change is out of date: trusting it would
/// mark present files gone.
package struct ScanTracker: Sendable {
    private(set) var waiting: [ScanRequest] = []
    private(set) var current: ScanRequest?
    /// While a scan runs: directories whose queue rows events changed (moved in, renamed,
    /// a file recorded), with the `epoch` of the last change.
    private var changedDuringScan = ExactKeyed<Int>()
    /// Counts changes; a listing remembers the epoch it was taken after.
    private(set) var epoch = 0

    var isScanning: Bool { current != nil }
    /// A scan runs or waits.
    var isBusy: Bool { current != nil || !waiting.isEmpty }

    /// Queues a scan unless the same one (or a recursive one of the same folder) already
    /// waits; true when added. Byte for byte: an NFD twin of a queued directory is another
    /// directory to scan.
    @discardableResult
    mutating func request(_ path: String, recursive: Bool) -> Bool {
        if waiting.contains(where: { $0.path.utf8.elementsEqual(path.utf8) && ($0.recursive || !recursive) }) { return false }
        waiting.append(ScanRequest(path: path, recursive: recursive))
        return true
    }

    /// Takes the next scan to run.
    mutating func begin() -> ScanRequest? {
        guard !waiting.isEmpty else { return nil }
        let next = waiting.removeFirst()
        current = next
        changedDuringScan.removeAll()
        return next
    }

    mutating func finish() {
        current = nil
        changedDuringScan.removeAll()
    }

    /// Events changed the queue rows of `dir` (only matters while a scan runs).
    mutating func noteChange(_ dir: String) {
        guard isScanning else { return }
        epoch += 1
        changedDuringScan[dir] = epoch
    }

    /// Whether `dir`, or a directory above it, changed after `since`.
    func changed(_ dir: String, since: Int) -> Bool {
        guard !changedDuringScan.isEmpty else { return false }
        var at = dir
        while true {
            if let e = changedDuringScan[at], e > since { return true }
            let up = PathNames.parent(of: at)
            if up.utf8.elementsEqual(at.utf8) || up.isEmpty { return false }
            at = up
        }
    }

    /// The outermost directories under `root` (or `root` itself) that events changed
    /// during this scan: not visited, but not gone either.
    func changedDirectories(within root: String) -> [String] {
        Self.outermost(changedDuringScan.keys.filter { PathNames.isWithin($0, root) })
    }

    /// A directory renamed: scans waiting for it (a new directory's, typically: the files
    /// written before its watch existed are only found by that scan) look at its new
    /// place. Returns the scan to request again when the running one may miss the moved
    /// tree (it walks through it now).
    mutating func follow(from: String, to: String) -> ScanRequest? {
        waiting = waiting.map { ScanRequest(path: PathNames.renamed($0.path, from: from, to: to) ?? $0.path, recursive: $0.recursive) }
        guard let current else { return nil }
        if let moved = PathNames.renamed(current.path, from: from, to: to) {
            return ScanRequest(path: moved, recursive: current.recursive)
        }
        if current.recursive, PathNames.isInside(from, current.path) {
            return ScanRequest(path: to, recursive: true)
        }
        return nil
    }

    /// The paths not inside another one of them (nor repeated), sorted by their bytes.
    /// Each is checked against all its ancestors, not the previous one kept: in byte order
    /// "/a b" falls between "/a" and "/a/b".
    package static func outermost(_ paths: some Sequence<String>) -> [String] {
        let all = Set(paths.map(ExactPath.init))
        return all.filter { path in
            var at = path.string
            while true {
                let up = PathNames.parent(of: at)
                if up.isEmpty || up.utf8.elementsEqual(at.utf8) { return true }
                if all.contains(ExactPath(up)) { return false }
                at = up
            }
        }
        .map(\.string)
        .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }
}
