import Testing
@testable import Ingest

@Suite struct ScanTrackerTests {
    @Test func requestsQueueOnceAndRecursiveCoversFlat() {
        var t = ScanTracker()
        #expect(t.request("/p", recursive: false) == true)
        #expect(t.request("/p", recursive: false) == false, "the same scan waits already")
        #expect(t.request("/p", recursive: true) == true, "a recursive one is more")
        #expect(t.request("/p", recursive: false) == false, "a waiting recursive scan covers it")
        #expect(t.waiting.count == 2)
    }

    @Test func nfdTwinIsAnotherFolderToScan() {
        var t = ScanTracker()
        #expect(t.request("/Caf\u{E9}", recursive: true) == true)
        #expect(t.request("/Cafe\u{301}", recursive: true) == true)
    }

    @Test func beginAndFinishTrackTheRunningScan() {
        var t = ScanTracker()
        #expect(t.begin() == nil)
        t.request("/p", recursive: true)
        #expect(t.isBusy && !t.isScanning)
        #expect(t.begin() == ScanRequest(path: "/p", recursive: true))
        #expect(t.isScanning && t.isBusy)
        t.finish()
        #expect(!t.isScanning && !t.isBusy)
    }

    @Test func changesCountOnlyWhileScanning() {
        var t = ScanTracker()
        t.noteChange("/p/a")
        #expect(t.epoch == 0)
        t.request("/p", recursive: true)
        _ = t.begin()
        let before = t.epoch
        t.noteChange("/p/a")
        #expect(t.epoch == before + 1)
        #expect(t.changed("/p/a", since: before))
        #expect(t.changed("/p/a/deep/er", since: before), "a change above counts")
        #expect(!t.changed("/p/b", since: before))
        #expect(!t.changed("/p/a", since: t.epoch), "a listing taken after the change is fresh")
    }

    @Test func finishForgetsTheChanges() {
        var t = ScanTracker()
        t.request("/p", recursive: true)
        _ = t.begin()
        t.noteChange("/p/a")
        t.finish()
        #expect(!t.changed("/p/a", since: 0))
    }

    @Test func changedDirectoriesAreTheOutermostWithinTheRoot() {
        var t = ScanTracker()
        t.request("/p", recursive: true)
        _ = t.begin()
        for d in ["/p/a", "/p/a/b", "/p/a b", "/q/c", "/p"] { t.noteChange(d) }
        #expect(t.changedDirectories(within: "/p") == ["/p"])
        #expect(t.changedDirectories(within: "/p/a") == ["/p/a"])
    }

    @Test func outermostHandlesBytesThatSortBetweenParentAndChild() {
        // In byte order "/a b" sorts between "/a" and "/a/b": "/a/b" is still inside "/a".
        #expect(ScanTracker.outermost(["/a/b", "/a b", "/a"]) == ["/a", "/a b"])
        #expect(ScanTracker.outermost(["/x/y", "/x/y"]) == ["/x/y"])
        #expect(ScanTracker.outermost([]) == [])
    }

    @Test func followMovesWaitingScansToTheNewPlace() {
        var t = ScanTracker()
        t.request("/p/new", recursive: true)
        t.request("/p/newer", recursive: false)
        #expect(t.follow(from: "/p/new", to: "/p/renamed") == nil)
        #expect(t.waiting == [ScanRequest(path: "/p/renamed", recursive: true), ScanRequest(path: "/p/newer", recursive: false)])
    }

    @Test func followRequestsTheRunningScanAgainWhenItMoved() {
        var t = ScanTracker()
        t.request("/p/a", recursive: false)
        _ = t.begin()
        #expect(t.follow(from: "/p/a", to: "/p/b") == ScanRequest(path: "/p/b", recursive: false))
    }

    @Test func followRequestsTheMovedTreeWhenTheRunningScanWalksThroughIt() {
        var t = ScanTracker()
        t.request("/p", recursive: true)
        _ = t.begin()
        #expect(t.follow(from: "/p/x/y", to: "/q/y") == ScanRequest(path: "/q/y", recursive: true))
        var flat = ScanTracker()
        flat.request("/p", recursive: false)
        _ = flat.begin()
        #expect(flat.follow(from: "/p/x/y", to: "/q/y") == nil, "a flat scan does not walk into it")
    }
}
