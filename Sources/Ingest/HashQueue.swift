import PhotolalaCore

/// The files waiting to be read by the hasher pool, as a pure value: what is queued (in
/// order, each path once), what is being recorded, and where the database backlog stands.
/// The ingest actor only performs the I/O around it.
///
/// Paths compare byte for byte (`ExactPath`): an NFC and an NFD spelling of one name are
/// two files, and one must not hide the other.
package struct HashQueue: Sendable {
    private var order: [String] = []
    private var head = 0
    /// Paths waiting to be hashed or being hashed.
    private(set) var queued = Set<ExactPath>()
    /// Paths whose result waits to be written: not queued again until it is, as if still
    /// being read (the queue says "pending" until then, and a scan would read them twice).
    /// A newer version that turns up meanwhile is not lost: its older result is `.stale`
    /// and the file settles again.
    private(set) var recording = Set<ExactPath>()
    /// Files the queue holds as waiting for a hash that were never put in `order`: a
    /// crash's leftovers, and whatever a first scan recorded. A first scan of a million
    /// photos kept a million paths in memory (twice: the queue and `queued`), and doing so
    /// cost the scan more than writing them to the database; the hashers read them back a
    /// chunk at a time when `order` runs dry. The row id after which to look next; nil
    /// when none is left.
    private(set) var backlogCursor: Int64?

    /// Enough to keep every hasher busy between two reads of the backlog.
    static let backlogChunk = 512
    /// Read-out entries are dropped from the front once this many pile up (and they are
    /// at least half the array): no O(n) shift per file, no unbounded growth.
    package static let compactAfter = 4096

    /// Queues a path unless it is queued, being hashed or being recorded; true when added.
    @discardableResult
    mutating func enqueue(_ path: String) -> Bool {
        let key = ExactPath(path)
        guard !recording.contains(key), queued.insert(key).inserted else { return false }
        order.append(path)
        return true
    }

    /// The next queued path, in order; nil when the in-memory queue is empty (then the
    /// backlog may have more).
    mutating func next() -> String? {
        while head < order.count {
            let path = order[head]
            head += 1
            if head > Self.compactAfter && head * 2 > order.count {
                order.removeFirst(head)
                head = 0
            }
            if queued.contains(ExactPath(path)) { return path }
        }
        return nil
    }

    /// The pool answered for `path`: it leaves the queue and waits to be recorded.
    mutating func hashed(_ path: String) {
        let key = ExactPath(path)
        queued.remove(key)
        recording.insert(key)
    }

    /// The results for these paths were written (or given up on).
    mutating func recorded(_ paths: some Sequence<String>) {
        for path in paths { recording.remove(ExactPath(path)) }
    }

    /// Drops every queued path that is `path` or below it (removed, a folder gone).
    mutating func drop(within path: String) {
        let before = queued.count
        queued = queued.filter { !PathNames.isWithin($0.string, path) }
        if queued.count != before {
            order = order[head...].filter { queued.contains(ExactPath($0)) }
            head = 0
        }
    }

    /// Files renamed (or inside a renamed directory) while queued or being hashed: that
    /// hash is of a path that no longer exists and will be dropped, while the queue row
    /// moved to the new name still has no hash. Returns the new names, which must settle
    /// again (without this the file sat unhashed until the next rescan).
    mutating func moved(from: String, to: String) -> [String] {
        var renamed: [String] = []
        for old in queued {
            guard let new = PathNames.renamed(old.string, from: from, to: to) else { continue }
            queued.remove(old)
            renamed.append(new)
        }
        return renamed
    }

    /// Nothing waits in memory.
    var isDrained: Bool { head >= order.count }

    /// Paths waiting in memory, at most (some may have left the queue since).
    var waiting: Int { order.count - head }

    // MARK: the backlog in the database

    /// Points the backlog at `start` (the row before the first file waiting for a hash).
    /// Never forward: files behind the cursor that wait again (a crash's, or ones whose
    /// read was thrown away) would be skipped; going back costs a re-read of rows that
    /// are filtered out.
    mutating func armBacklog(at start: Int64) {
        backlogCursor = min(backlogCursor ?? start, start)
    }

    /// A chunk was read from the backlog: continue after its last row, or stop when it
    /// was empty.
    mutating func backlogRead(lastId: Int64?) {
        backlogCursor = lastId
    }

    /// Collections keep the capacity of their largest moment; new ones start small.
    mutating func releaseMemory() {
        queued = []
        order = []
        head = 0
        recording = []
    }
}
