/// Renames waiting for their other half: inotify reports one as a MOVED_FROM and a
/// MOVED_TO sharing a cookie, possibly split across two reads; a MOVED_FROM left alone
/// past its deadline means the entry left the watched tree.
struct PendingMoves {
    struct Move {
        var cookie: UInt32
        var parent: DirNode
        var name: String
        var isDirectory: Bool
        var deadline: ContinuousClock.Instant
    }

    private var moves: [Move] = []

    var nextDeadline: ContinuousClock.Instant? { moves.map(\.deadline).min() }

    mutating func add(_ move: Move) {
        moves.append(move)
    }

    /// The MOVED_FROM this MOVED_TO's `cookie` pairs with.
    mutating func take(cookie: UInt32) -> Move? {
        moves.firstIndex { $0.cookie == cookie }.map { moves.remove(at: $0) }
    }

    /// Moves away from `name` in `parent`, now that something new arrived there: each must
    /// be reported (as gone) before the new entry.
    mutating func takeReused(_ name: String, in parent: DirNode) -> [Move] {
        take { $0.parent === parent && $0.name == name }
    }

    /// Moves whose MOVED_TO did not come by `now`.
    mutating func takeExpired(by now: ContinuousClock.Instant) -> [Move] {
        take { $0.deadline <= now }
    }

    /// Every move still waiting (events were lost: none will pair).
    mutating func takeAll() -> [Move] {
        defer { moves.removeAll() }
        return moves
    }

    private mutating func take(where matches: (Move) -> Bool) -> [Move] {
        guard !moves.isEmpty else { return [] }
        let taken = moves.filter(matches)
        if !taken.isEmpty { moves.removeAll(where: matches) }
        return taken
    }
}
