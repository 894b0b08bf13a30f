import PhotolalaCore

/// The settle rule and Syncthing-style roll-up, as a pure value: no clock, no I/O. The
/// driver feeds it events with the time they happened, asks `due(now:)` for what is ready,
/// and sleeps until `nextDeadline` (exactly; it never needs to poll).
///
/// - A file is ready `settle` after its last event, but never later than `maxHold` after
///   its first one (a file that never goes quiet is handed on; the hasher's stat
///   before/after catches one that is still changing, and it comes back via
///   `markUnsettled`).
/// - When more than `rollUpThreshold` files of one directory are pending, they become one
///   `.scanDirectory(dir, recursive: false)` with the same timing, so a copy of thousands
///   of photos costs one listing instead of thousands of entries.
/// - A pending recursive scan covers everything below it: events there extend it.
package struct SettleAggregator<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    package enum Ready: Sendable, Hashable {
        case file(String)
        /// List `path` (and below it if `recursive`) and reconcile with the queue.
        case scanDirectory(String, recursive: Bool)
    }

    package let settle: Duration
    package let maxHold: Duration
    package let rollUpThreshold: Int

    private struct Entry: Sendable {
        var first: Instant
        var last: Instant
        var generation: UInt64
        var recursive: Bool = false
    }

    private enum Key: Hashable, Sendable {
        case file(String)
        case scan(String)
    }

    private struct Deadline: Comparable, Sendable {
        var at: Instant
        var generation: UInt64
        var key: Key
        static func < (a: Deadline, b: Deadline) -> Bool {
            a.at != b.at ? a.at < b.at : a.generation < b.generation
        }
        static func == (a: Deadline, b: Deadline) -> Bool { a.at == b.at && a.generation == b.generation }
    }

    // Keyed byte for byte (`ExactPath`): two files whose names differ only in Unicode
    // normalization are two pending files, not one.
    private var files = ExactKeyed<Entry>()
    /// Pending file paths by parent directory: the roll-up count and cheap subtree drops.
    private var filesByDirectory = ExactKeyed<Set<ExactPath>>()
    private var scans = ExactKeyed<Entry>()
    private var recursiveScans = 0
    /// Min-heap with lazy deletion: an update pushes a new deadline and leaves the old one
    /// behind; stale tops are discarded after every mutation so `nextDeadline` is exact.
    private var heap = MinHeap<Deadline>()
    private var generation: UInt64 = 0

    package init(settle: Duration, maxHold: Duration, rollUpThreshold: Int) {
        self.settle = settle
        self.maxHold = maxHold
        self.rollUpThreshold = max(1, rollUpThreshold)
    }

    package init(options: WatcherOptions) {
        self.init(settle: options.settle, maxHold: options.maxHold, rollUpThreshold: options.rollUpThreshold)
    }

    /// When the earliest pending item becomes ready; nil when nothing is pending.
    package var nextDeadline: Instant? { heap.top?.at }

    package var pendingFiles: Int { files.count }
    package var pendingScans: Int { scans.count }
    package var isEmpty: Bool { files.isEmpty && scans.isEmpty }

    /// A file was closed after writing or moved in.
    package mutating func fileWritten(_ path: String, now: Instant) {
        let dir = PathNames.parent(of: path)
        if let covering = coveringScan(ofFileIn: dir) {
            touchScan(covering, now: now)
        } else if var entry = files[path] {
            entry.last = now
            entry.generation = nextGeneration()
            files[path] = entry
            schedule(.file(path), entry)
        } else {
            let entry = Entry(first: now, last: now, generation: nextGeneration())
            files[path] = entry
            filesByDirectory[dir, default: []].insert(ExactPath(path))
            schedule(.file(path), entry)
            if let count = filesByDirectory[dir]?.count, count > rollUpThreshold {
                rollUp(dir, now: now)
            }
        }
        pruneTop()
    }

    /// The hasher saw the file change while reading it: it waits for another settle period.
    package mutating func markUnsettled(_ path: String, now: Instant) {
        fileWritten(path, now: now)
    }

    /// Something under `dir` needs a look (a new directory, an overflow, a roll-up from
    /// elsewhere). Counts as an event: it settles like a file.
    package mutating func directoryScanRequested(_ dir: String, recursive: Bool = true, now: Instant) {
        if let covering = coveringScan(ofDirectory: dir, recursive: recursive) {
            touchScan(covering, now: now)
            pruneTop()
            return
        }
        var entry = scans[dir] ?? Entry(first: now, last: now, generation: 0)
        entry.last = now
        if recursive && !entry.recursive {
            entry.recursive = true
            recursiveScans += 1
            // Everything pending below is covered now; keep its earliest first event so
            // the cap still holds for it.
            for (path, absorbed) in scans.pairs where PathNames.isInside(path, dir) {
                entry.first = min(entry.first, absorbed.first)
                dropScan(path)
            }
            for directory in Array(filesByDirectory.keys) where PathNames.isWithin(directory, dir) {
                for path in filesByDirectory[directory] ?? [] {
                    if let absorbed = files.removeValue(forKey: path.string) { entry.first = min(entry.first, absorbed.first) }
                }
                filesByDirectory[directory] = nil
            }
        } else if !recursive {
            for path in filesByDirectory.removeValue(forKey: dir) ?? [] {
                if let absorbed = files.removeValue(forKey: path.string) { entry.first = min(entry.first, absorbed.first) }
            }
        }
        entry.generation = nextGeneration()
        scans[dir] = entry
        schedule(.scan(dir), entry)
        pruneTop()
    }

    /// A file or directory is gone: nothing pending at or below `path` is handed on.
    /// A pending scan of an ancestor stays (it will simply not find it).
    package mutating func removed(_ path: String) {
        if files.removeValue(forKey: path) != nil {
            let dir = PathNames.parent(of: path)
            filesByDirectory[dir]?.remove(ExactPath(path))
            if filesByDirectory[dir]?.isEmpty == true { filesByDirectory[dir] = nil }
        }
        dropScan(path)
        for dir in Array(scans.keys) where PathNames.isInside(dir, path) { dropScan(dir) }
        for dir in Array(filesByDirectory.keys) where PathNames.isWithin(dir, path) {
            for file in filesByDirectory.removeValue(forKey: dir) ?? [] { files[file.string] = nil }
        }
        pruneTop()
    }

    /// A file or directory was renamed inside the tree: what was pending moves with it,
    /// keeping its timing.
    package mutating func moved(from old: String, to new: String) {
        guard !old.utf8.elementsEqual(new.utf8) else { return }
        // Anything already pending at the destination was replaced by the rename.
        removed(new)
        func rename(_ path: String) -> String? {
            if path.utf8.elementsEqual(old.utf8) { return new }
            guard PathNames.isInside(path, old) else { return nil }
            return (new == "/" ? "" : new) + String(Substring(path.utf8.dropFirst(old == "/" ? 0 : old.utf8.count)))
        }
        for (path, entry) in scans.pairs {
            guard let renamed = rename(path) else { continue }
            dropScan(path)
            var moved = entry
            moved.generation = nextGeneration()
            if moved.recursive { recursiveScans += 1 }
            scans[renamed] = moved
            schedule(.scan(renamed), moved)
        }
        for (path, entry) in files.pairs {
            guard let renamed = rename(path) else { continue }
            files[path] = nil
            let oldDir = PathNames.parent(of: path)
            filesByDirectory[oldDir]?.remove(ExactPath(path))
            if filesByDirectory[oldDir]?.isEmpty == true { filesByDirectory[oldDir] = nil }
            var moved = entry
            moved.generation = nextGeneration()
            files[renamed] = moved
            filesByDirectory[PathNames.parent(of: renamed), default: []].insert(ExactPath(renamed))
            schedule(.file(renamed), moved)
        }
        pruneTop()
    }

    /// Everything whose deadline has passed, earliest first. Each item is handed out once.
    package mutating func due(now: Instant) -> [Ready] {
        var ready: [Ready] = []
        while let top = heap.top, top.at <= now {
            heap.pop()
            switch top.key {
            case .file(let path):
                guard let entry = files[path], entry.generation == top.generation else { continue }
                files[path] = nil
                let dir = PathNames.parent(of: path)
                filesByDirectory[dir]?.remove(ExactPath(path))
                if filesByDirectory[dir]?.isEmpty == true { filesByDirectory[dir] = nil }
                ready.append(.file(path))
            case .scan(let dir):
                guard let entry = scans[dir], entry.generation == top.generation else { continue }
                dropScan(dir)
                ready.append(.scanDirectory(dir, recursive: entry.recursive))
            }
        }
        pruneTop()
        return ready
    }

    // MARK: - Internals

    private mutating func nextGeneration() -> UInt64 {
        generation &+= 1
        return generation
    }

    private func deadline(of entry: Entry) -> Instant {
        min(entry.last.advanced(by: settle), entry.first.advanced(by: maxHold))
    }

    private mutating func schedule(_ key: Key, _ entry: Entry) {
        heap.push(Deadline(at: deadline(of: entry), generation: entry.generation, key: key))
    }

    private mutating func pruneTop() {
        while let top = heap.top {
            let live: Bool
            switch top.key {
            case .file(let path): live = files[path]?.generation == top.generation
            case .scan(let dir): live = scans[dir]?.generation == top.generation
            }
            if live { return }
            heap.pop()
        }
    }

    private mutating func touchScan(_ dir: String, now: Instant) {
        guard var entry = scans[dir] else { return }
        entry.last = now
        entry.generation = nextGeneration()
        scans[dir] = entry
        schedule(.scan(dir), entry)
    }

    private mutating func dropScan(_ dir: String) {
        if let entry = scans.removeValue(forKey: dir), entry.recursive { recursiveScans -= 1 }
    }

    private mutating func rollUp(_ dir: String, now: Instant) {
        var entry = scans[dir] ?? Entry(first: now, last: now, generation: 0)
        for path in filesByDirectory.removeValue(forKey: dir) ?? [] {
            if let absorbed = files.removeValue(forKey: path.string) { entry.first = min(entry.first, absorbed.first) }
        }
        entry.last = now
        entry.generation = nextGeneration()
        scans[dir] = entry
        schedule(.scan(dir), entry)
    }

    /// The pending scan that already lists a file in `dir`: `dir` itself, or a recursive
    /// scan of an ancestor.
    private func coveringScan(ofFileIn dir: String) -> String? {
        if scans[dir] != nil { return dir }
        return recursiveAncestorScan(of: dir)
    }

    private func coveringScan(ofDirectory dir: String, recursive: Bool) -> String? {
        if let entry = scans[dir], entry.recursive || !recursive { return dir }
        return recursiveAncestorScan(of: dir)
    }

    private func recursiveAncestorScan(of dir: String) -> String? {
        guard recursiveScans > 0 else { return nil }
        var current = dir
        while true {
            if let entry = scans[current], entry.recursive { return current }
            let up = PathNames.parent(of: current)
            if up == current || up.isEmpty { return nil }
            current = up
        }
    }
}

/// A binary min-heap; small enough not to want a dependency.
struct MinHeap<Element: Comparable & Sendable>: Sendable {
    private var items: [Element] = []

    var top: Element? { items.first }
    var count: Int { items.count }

    mutating func push(_ element: Element) {
        items.append(element)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child] < items[parent] else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    mutating func pop() -> Element? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let result = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < items.count, items[left] < items[smallest] { smallest = left }
            if right < items.count, items[right] < items[smallest] { smallest = right }
            if smallest == parent { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return result
    }
}
