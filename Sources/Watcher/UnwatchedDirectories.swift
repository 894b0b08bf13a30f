import PhotolalaCore

/// The subtrees the watch limit left unwatched, each kept by its top node with how many
/// directories it holds, scanned on a schedule instead (`watch.unwatched` in status);
/// and the episode from the first one until every directory is watched again: its event
/// is sent once per episode, its log line once per process.
struct UnwatchedDirectories {
    private var tops: [ObjectIdentifier: DirNode] = [:]
    private var schedule: Backoff
    /// When the unwatched subtrees are next scanned (and tried again).
    private(set) var rescanAt: ContinuousClock.Instant?
    private var episode = false
    private var logged = false

    init(schedule: Backoff) {
        self.schedule = schedule
    }

    var isEmpty: Bool { tops.isEmpty }

    /// Directories in all the unwatched subtrees.
    var directories: Int { tops.values.reduce(0) { $0 + $1.unwatchedCount } }

    mutating func add(_ top: DirNode, directories: Int) {
        top.unwatchedCount = max(1, directories)
        tops[ObjectIdentifier(top)] = top
    }

    /// `node` left the tree (or is watched again now).
    mutating func remove(_ node: DirNode) {
        guard node.unwatchedCount > 0 else { return }
        tops[ObjectIdentifier(node)] = nil
        node.unwatchedCount = 0
    }

    /// The tops still in the tree, to scan and try again; the list starts over.
    mutating func takeForRescan() -> [DirNode] {
        defer { tops.removeAll() }
        return tops.values.filter(\.isAttached)
    }

    /// After a pass that may have left directories unwatched: schedules their scan, and
    /// says whether this begins an episode (tell the user) and whether the log line is
    /// still to be written (`canLog`: only with inotify open, once per process).
    mutating func afterPass(canLog: Bool) -> (begins: Bool, log: Bool) {
        guard !tops.isEmpty else { return (false, false) }
        if rescanAt == nil { rescanAt = .now + schedule.failDuration() }
        guard !episode else { return (false, false) }
        episode = true
        let log = canLog && !logged
        if log { logged = true }
        return (true, log)
    }

    /// After the rescan: the next one if directories stay unwatched; otherwise whether this
    /// ends an episode (every directory is watched again: say so).
    mutating func afterRescan() -> Bool {
        guard tops.isEmpty else {
            rescanAt = .now + schedule.failDuration()
            return false
        }
        rescanAt = nil
        schedule.reset()
        defer { episode = false }
        return episode
    }
}
