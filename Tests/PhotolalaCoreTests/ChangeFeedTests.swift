import Foundation
import PhotolalaCore
import Testing

/// The one wake primitive: a change told inline is never lost by whoever waits for it.
@Suite struct ChangeFeedTests {
    @Test func aChangeBeforeTheWaitReturnsAtOnce() async {
        let feed = ChangeFeed()
        let since = feed.generation
        feed.changed()
        // Would wait forever if the change before it were lost.
        await feed.wait(since: since)
        #expect(feed.generation == since + 1)
    }

    @Test func aWaiterWakesOnTheNextChange() async throws {
        let feed = ChangeFeed()
        let since = feed.generation
        let waiter = Task { await feed.wait(since: since) }
        try await Task.sleep(for: .milliseconds(20))
        feed.changed()
        await waiter.value
        #expect(feed.generation > since)
    }

    @Test func aCancelledWaiterReturnsWithoutAChange() async {
        let feed = ChangeFeed()
        let since = feed.generation
        let waiter = Task { await feed.wait(since: since) }
        waiter.cancel()
        await waiter.value
        #expect(feed.generation == since)
    }

    @Test func aDeadlineEndsTheWait() async {
        let feed = ChangeFeed()
        await feed.wait(since: feed.generation, until: ContinuousClock.now + .milliseconds(20))
        #expect(feed.generation == 0)
    }

    @Test func aBurstOfChangesIsOneElementForEachSubscriber() async {
        let feed = ChangeFeed()
        var changes = feed.changes().makeAsyncIterator()
        _ = await changes.next()
        for _ in 0..<100 { feed.changed() }
        _ = await changes.next()
        #expect(feed.generation == 100)
    }
}
