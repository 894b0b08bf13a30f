import Synchronization

/// Which waiting uid goes next: round robin, each uid's requests in the order they came.
/// Pure, so the order is tested with plain numbers.
package struct FairQueue<Item>: Sendable where Item: Sendable {
    private var waiting: [UInt32: [Item]] = [:]
    /// Uids with something waiting, in the order they are served.
    private var turn: [UInt32] = []

    package init() {}

    package var isEmpty: Bool { turn.isEmpty }
    package var count: Int { waiting.values.reduce(0) { $0 + $1.count } }

    package mutating func push(_ item: Item, uid: UInt32) {
        if waiting[uid] == nil { turn.append(uid) }
        waiting[uid, default: []].append(item)
    }

    /// The oldest item of the uid whose turn it is; that uid then goes to the back.
    package mutating func pop() -> Item? {
        guard !turn.isEmpty else { return nil }
        let uid = turn.removeFirst()
        var items = waiting[uid] ?? []
        let item = items.removeFirst()
        if items.isEmpty {
            waiting[uid] = nil
        } else {
            waiting[uid] = items
            turn.append(uid)
        }
        return item
    }
}

/// The members' calls share a few lanes, taken in turn by uid: however many calls one
/// member has waiting (up to its `maxRequestsPerUser`), another member's next call waits
/// for at most one of them, not all (issue 31 item 9: no uid crowds out another). Root's
/// and the daemon's user's calls never wait here.
package final class MemberLanes: Sendable {
    private struct State {
        var running = 0
        var queue = FairQueue<CheckedContinuation<Void, Never>>()
    }
    private let state = Mutex(State())
    package let lanes: Int

    package init(lanes: Int) {
        self.lanes = max(1, lanes)
    }

    /// Runs `body` once a lane is free and it is `uid`'s turn.
    package func run<T: Sendable>(uid: UInt32, _ body: @Sendable () async -> T) async -> T {
        await withCheckedContinuation { (go: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.running < lanes && s.queue.isEmpty {
                    s.running += 1
                    return true
                }
                s.queue.push(go, uid: uid)
                return false
            }
            if now { go.resume() }
        }
        defer {
            let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
                if let next = s.queue.pop() { return next }
                s.running -= 1
                return nil
            }
            next?.resume()
        }
        return await body()
    }
}
