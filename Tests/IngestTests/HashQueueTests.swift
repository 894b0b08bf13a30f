import Testing
@testable import Ingest

@Suite struct HashQueueTests {
    let nfc = "/p/Caf\u{E9}.jpg", nfd = "/p/Cafe\u{301}.jpg"

    @Test func pathsComeOutInOrderOnce() {
        var q = HashQueue()
        #expect(q.enqueue("/p/a") == true)
        #expect(q.enqueue("/p/b") == true)
        #expect(q.enqueue("/p/a") == false, "already queued")
        #expect(q.next() == "/p/a")
        #expect(q.next() == "/p/b")
        #expect(q.next() == nil)
        #expect(q.isDrained)
    }

    /// What a hash step shares out: the paths still waiting in memory.
    @Test func waitingCountsWhatIsLeftToTake() {
        var q = HashQueue()
        #expect(q.waiting == 0)
        for p in ["/p/a", "/p/b", "/p/c"] { q.enqueue(p) }
        #expect(q.waiting == 3)
        _ = q.next()
        #expect(q.waiting == 2)
        _ = q.next(); _ = q.next()
        #expect(q.waiting == 0 && q.isDrained)
    }

    @Test func nfcAndNfdTwinsAreTwoFiles() {
        var q = HashQueue()
        #expect(q.enqueue(nfc) == true)
        #expect(q.enqueue(nfd) == true)
        let out = [q.next(), q.next()].compactMap { $0 }.map { Array($0.utf8) }
        #expect(Set(out) == [Array(nfc.utf8), Array(nfd.utf8)])
    }

    @Test func aPathBeingHashedIsNotQueuedAgainUntilRecorded() {
        var q = HashQueue()
        q.enqueue("/p/a")
        #expect(q.next() == "/p/a")
        #expect(q.enqueue("/p/a") == false, "still being hashed")
        q.hashed("/p/a")
        #expect(q.recording.contains(.init("/p/a")))
        #expect(q.enqueue("/p/a") == false, "its result waits to be written")
        q.recorded(["/p/a"])
        #expect(q.enqueue("/p/a") == true, "written: a newer version may be read")
    }

    @Test func dropWithinRemovesTheFolderAndBelowOnly() {
        var q = HashQueue()
        for p in ["/p/a/1", "/p/a/2", "/p/ab/3", "/p/a"] { q.enqueue(p) }
        q.drop(within: "/p/a")
        #expect(q.next() == "/p/ab/3")
        #expect(q.next() == nil)
    }

    @Test func dropIsByteExact() {
        var q = HashQueue()
        q.enqueue("/Cafe\u{301}/x.jpg")
        q.drop(within: "/Caf\u{E9}")
        #expect(q.next().map { Array($0.utf8) } == Array("/Cafe\u{301}/x.jpg".utf8))
    }

    @Test func movedAnswersTheNewNamesAndForgetsTheOld() {
        var q = HashQueue()
        for p in ["/p/d/1.jpg", "/p/d/sub/2.jpg", "/p/dx/3.jpg"] { q.enqueue(p) }
        let renamed = Set(q.moved(from: "/p/d", to: "/p/e"))
        #expect(renamed == ["/p/e/1.jpg", "/p/e/sub/2.jpg"])
        #expect(q.next() == "/p/dx/3.jpg", "the old names are not hashed")
        #expect(q.next() == nil)
    }

    @Test func movedCoversAFileBeingHashed() {
        var q = HashQueue()
        q.enqueue("/p/a.jpg")
        _ = q.next()
        #expect(q.moved(from: "/p/a.jpg", to: "/p/b.jpg") == ["/p/b.jpg"])
    }

    @Test func backlogCursorOnlyMovesBackWhenArmed() {
        var q = HashQueue()
        #expect(q.backlogCursor == nil)
        q.armBacklog(at: 100)
        #expect(q.backlogCursor == 100)
        q.armBacklog(at: 200)
        #expect(q.backlogCursor == 100, "never forward: rows behind it would be skipped")
        q.armBacklog(at: 50)
        #expect(q.backlogCursor == 50)
        q.backlogRead(lastId: 562)
        #expect(q.backlogCursor == 562)
        q.backlogRead(lastId: nil)
        #expect(q.backlogCursor == nil)
    }

    @Test func longQueuesCompactWithoutLosingOrder() {
        var q = HashQueue()
        let n = HashQueue.compactAfter * 3
        for i in 0..<n { q.enqueue("/p/\(i)") }
        var seen: [String] = []
        while let p = q.next() {
            seen.append(p)
            if seen.count == n / 2 { q.enqueue("/p/late") }
        }
        #expect(seen.count == n + 1)
        #expect(seen.prefix(3) == ["/p/0", "/p/1", "/p/2"])
        #expect(seen.last == "/p/late")
    }

    @Test func releaseMemoryEmptiesEverythingButTheBacklog() {
        var q = HashQueue()
        q.enqueue("/p/a")
        q.hashed("/p/a")
        q.armBacklog(at: 7)
        q.releaseMemory()
        #expect(q.queued.isEmpty && q.recording.isEmpty && q.isDrained)
        #expect(q.backlogCursor == 7)
    }
}
