import Synchronization
import Testing
import Control

/// Members' calls that read much take turns by uid: one member with many waiting calls
/// makes another wait for one of them, not all.
@Suite struct MemberLanesTests {
    @Test func eachUidInTurnEachUidsItemsInOrder() {
        var q = FairQueue<String>()
        for item in ["a1", "a2", "a3"] { q.push(item, uid: 1) }
        q.push("b1", uid: 2)
        q.push("c1", uid: 3)
        q.push("b2", uid: 2)
        var order: [String] = []
        while let next = q.pop() { order.append(next) }
        #expect(order == ["a1", "b1", "c1", "a2", "b2", "a3"])
        #expect(q.isEmpty && q.count == 0)
    }

    @Test func anotherUidWaitsForOneCallOfTheBusyOneNotAll() async {
        let lanes = MemberLanes(lanes: 1)
        let order = Log()
        let release = Log()
        @Sendable func call(_ name: String, uid: UInt32, hold: Bool = false) async {
            await lanes.run(uid: uid) { () async -> Void in
                order.add(name)
                while hold && release.items.isEmpty { try? await Task.sleep(for: .milliseconds(5)) }
            }
        }
        // uid 1's first call holds the only lane until told.
        let first = Task { await call("a1", uid: 1, hold: true) }
        while order.items.isEmpty { try? await Task.sleep(for: .milliseconds(5)) }
        var waiting: [Task<Void, Never>] = []
        for name in ["a2", "a3", "a4"] {
            waiting.append(Task { await call(name, uid: 1) })
            try? await Task.sleep(for: .milliseconds(20))
        }
        waiting.append(Task { await call("b1", uid: 2) })
        try? await Task.sleep(for: .milliseconds(20))
        release.add("go")
        await first.value
        for t in waiting { await t.value }
        #expect(order.items == ["a1", "a2", "b1", "a3", "a4"])
    }
}

final class Log: Sendable {
    private let stored = Mutex<[String]>([])
    func add(_ item: String) { stored.withLock { $0.append(item) } }
    var items: [String] { stored.withLock { $0 } }
}
