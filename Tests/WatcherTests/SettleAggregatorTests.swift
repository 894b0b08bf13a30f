import Testing
import Watcher

/// Pure tests: instants are built by hand from one origin, no clock runs.
@Suite struct SettleAggregatorTests {
    typealias Aggregator = SettleAggregator<ContinuousClock.Instant>
    let t0 = ContinuousClock.now

    func at(_ seconds: Double) -> ContinuousClock.Instant { t0 + .milliseconds(Int(seconds * 1000)) }

    func make(settle: Int = 5, maxHold: Int = 60, rollUp: Int = 4) -> Aggregator {
        Aggregator(settle: .seconds(settle), maxHold: .seconds(maxHold), rollUpThreshold: rollUp)
    }

    @Test func fileIsReadyOneSettleAfterItsEvent() {
        var agg = make()
        agg.fileWritten("/p/a.jpg", now: at(0))
        #expect(agg.nextDeadline == at(5))
        #expect(agg.due(now: at(4.999)).isEmpty)
        #expect(agg.due(now: at(5)) == [.file("/p/a.jpg")])
        #expect(agg.isEmpty)
        #expect(agg.nextDeadline == nil)
        #expect(agg.due(now: at(100)).isEmpty, "handed out once")
    }

    @Test func namesThatDifferOnlyInUnicodeNormalizationAreTwoFiles() {
        // "Café.jpg" as a Linux client writes it (NFC) and as a Mac client does (NFD):
        // equal Swift Strings, two files on disk.
        let nfc = "/p/Caf\u{E9}.jpg", nfd = "/p/Cafe\u{301}.jpg"
        #expect(nfc == nfd && !nfc.utf8.elementsEqual(nfd.utf8))
        var agg = make()
        agg.fileWritten(nfc, now: at(0))
        agg.fileWritten(nfd, now: at(1))
        #expect(agg.pendingFiles == 2)
        let ready = agg.due(now: at(6))
        #expect(ready.count == 2)
        let paths = ready.compactMap { if case .file(let p) = $0 { return Array(p.utf8) } else { return nil } }
        #expect(Set(paths) == [Array(nfc.utf8), Array(nfd.utf8)])
        // Removing one leaves the other.
        agg.fileWritten(nfc, now: at(10))
        agg.fileWritten(nfd, now: at(10))
        agg.removed(nfd)
        #expect(agg.pendingFiles == 1)
    }

    @Test func aNewEventRestartsTheSettlePeriod() {
        var agg = make()
        agg.fileWritten("/p/a.jpg", now: at(0))
        agg.fileWritten("/p/a.jpg", now: at(3))
        #expect(agg.nextDeadline == at(8))
        #expect(agg.due(now: at(5)).isEmpty)
        #expect(agg.due(now: at(8)) == [.file("/p/a.jpg")])
    }

    @Test func aFileThatNeverGoesQuietIsHandedOnAtTheCap() {
        var agg = make(settle: 5, maxHold: 20)
        var t = 0.0
        while t < 20 {
            agg.fileWritten("/p/busy.mov", now: at(t))
            #expect(agg.due(now: at(t)).isEmpty)
            t += 2
        }
        #expect(agg.nextDeadline == at(20))
        #expect(agg.due(now: at(20)) == [.file("/p/busy.mov")])
        // The next event after the hand-over starts a fresh hold.
        agg.fileWritten("/p/busy.mov", now: at(21))
        #expect(agg.nextDeadline == at(26))
    }

    @Test func readyItemsComeEarliestFirst() {
        var agg = make()
        agg.fileWritten("/p/b.jpg", now: at(1))
        agg.fileWritten("/q/a.jpg", now: at(0))
        agg.fileWritten("/p/c.jpg", now: at(2))
        #expect(agg.due(now: at(10)) == [.file("/q/a.jpg"), .file("/p/b.jpg"), .file("/p/c.jpg")])
    }

    @Test func manyFilesInOneDirectoryRollUpIntoOneScan() {
        var agg = make(rollUp: 4)
        for i in 0..<4 { agg.fileWritten("/p/\(i).jpg", now: at(Double(i))) }
        #expect(agg.pendingFiles == 4 && agg.pendingScans == 0, "at the threshold: still files")
        agg.fileWritten("/p/4.jpg", now: at(4))
        #expect(agg.pendingFiles == 0 && agg.pendingScans == 1)
        agg.fileWritten("/other/x.jpg", now: at(4))
        // Later events in the directory extend the scan, they add no entries.
        agg.fileWritten("/p/5.jpg", now: at(6))
        #expect(agg.pendingScans == 1 && agg.pendingFiles == 1)
        #expect(agg.due(now: at(9)) == [.file("/other/x.jpg")])
        #expect(agg.due(now: at(11)) == [.scanDirectory("/p", recursive: false)])
    }

    @Test func aRolledUpDirectoryKeepsTheEarliestFirstEventForTheCap() {
        var agg = make(settle: 5, maxHold: 10, rollUp: 2)
        agg.fileWritten("/p/a.jpg", now: at(0))
        agg.fileWritten("/p/b.jpg", now: at(4))
        agg.fileWritten("/p/c.jpg", now: at(8))
        agg.fileWritten("/p/d.jpg", now: at(9))
        #expect(agg.nextDeadline == at(10))
        #expect(agg.due(now: at(10)) == [.scanDirectory("/p", recursive: false)])
    }

    @Test func subdirectoriesRollUpSeparately() {
        var agg = make(rollUp: 2)
        for name in ["a", "b", "c"] { agg.fileWritten("/p/\(name).jpg", now: at(0)) }
        for name in ["a", "b"] { agg.fileWritten("/p/sub/\(name).jpg", now: at(0)) }
        #expect(agg.pendingScans == 1 && agg.pendingFiles == 2)
    }

    @Test func markUnsettledMakesAFileWaitAnotherSettle() {
        var agg = make()
        agg.fileWritten("/p/a.jpg", now: at(0))
        #expect(agg.due(now: at(5)) == [.file("/p/a.jpg")])
        // The hasher saw it change while reading.
        agg.markUnsettled("/p/a.jpg", now: at(7))
        #expect(agg.nextDeadline == at(12))
        #expect(agg.due(now: at(11)).isEmpty)
        #expect(agg.due(now: at(12)) == [.file("/p/a.jpg")])
    }

    @Test func removalCancelsPendingWork() {
        var agg = make(rollUp: 2)
        agg.fileWritten("/p/a.jpg", now: at(0))
        agg.fileWritten("/p/keep.jpg", now: at(0))
        agg.removed("/p/a.jpg")
        #expect(agg.due(now: at(10)) == [.file("/p/keep.jpg")])

        for name in ["x", "y", "z"] { agg.fileWritten("/q/d/\(name).jpg", now: at(20)) }
        agg.fileWritten("/q/d/e/deep.jpg", now: at(20))
        agg.directoryScanRequested("/q/other", now: at(20))
        agg.fileWritten("/q2/a.jpg", now: at(20))
        agg.removed("/q")
        #expect(agg.due(now: at(100)) == [.file("/q2/a.jpg")], "a directory removal drops everything below it, and only that")
        #expect(agg.isEmpty)
    }

    @Test func aRecursiveScanAbsorbsAndCoversWhatIsBelow() {
        var agg = make(settle: 5, maxHold: 60)
        agg.fileWritten("/r/a/x.jpg", now: at(0))
        agg.directoryScanRequested("/r/a/b", recursive: false, now: at(1))
        agg.fileWritten("/elsewhere/y.jpg", now: at(1))
        agg.directoryScanRequested("/r", recursive: true, now: at(2))
        #expect(agg.pendingFiles == 1 && agg.pendingScans == 1)
        // An event below a pending recursive scan extends it instead of adding an entry.
        agg.fileWritten("/r/a/b/c/z.jpg", now: at(4))
        agg.directoryScanRequested("/r/a", now: at(4))
        #expect(agg.pendingFiles == 1 && agg.pendingScans == 1)
        #expect(agg.due(now: at(8.5)) == [.file("/elsewhere/y.jpg")])
        #expect(agg.due(now: at(9)) == [.scanDirectory("/r", recursive: true)])
    }

    @Test func aRecursiveScanIsCappedFromTheEarliestAbsorbedEvent() {
        var agg = make(settle: 5, maxHold: 10)
        agg.fileWritten("/r/a.jpg", now: at(0))
        agg.directoryScanRequested("/r", now: at(3))
        agg.fileWritten("/r/b.jpg", now: at(6))
        agg.fileWritten("/r/c.jpg", now: at(9))
        #expect(agg.nextDeadline == at(10))
    }

    @Test func moveCarriesPendingWorkWithItsTiming() {
        var agg = make(rollUp: 10)
        agg.fileWritten("/p/old/a.jpg", now: at(0))
        agg.fileWritten("/p/old/sub/b.jpg", now: at(1))
        agg.directoryScanRequested("/p/old/new", now: at(2))
        agg.fileWritten("/p/oldish/c.jpg", now: at(0))
        agg.moved(from: "/p/old", to: "/p/renamed")
        #expect(agg.due(now: at(5)) == [.file("/p/oldish/c.jpg"), .file("/p/renamed/a.jpg")])
        #expect(agg.due(now: at(10)) == [.file("/p/renamed/sub/b.jpg"), .scanDirectory("/p/renamed/new", recursive: true)])
        agg.fileWritten("/p/f.jpg", now: at(20))
        agg.moved(from: "/p/f.jpg", to: "/p/g.jpg")
        #expect(agg.due(now: at(25)) == [.file("/p/g.jpg")])
    }

    @Test func nextDeadlineSkipsSupersededEntries() {
        var agg = make()
        agg.fileWritten("/p/a.jpg", now: at(0))
        agg.fileWritten("/p/b.jpg", now: at(1))
        agg.fileWritten("/p/a.jpg", now: at(2))
        #expect(agg.nextDeadline == at(6))
        agg.removed("/p/b.jpg")
        #expect(agg.nextDeadline == at(7))
    }

    @Test func manyEventsStayCheap() {
        var agg = make(settle: 5, maxHold: 60, rollUp: 128)
        for round in 0..<20 {
            for i in 0..<5_000 { agg.fileWritten("/p/d\(i % 100)/f\(i).jpg", now: at(Double(round) * 0.01)) }
        }
        #expect(agg.pendingScans == 0 && agg.pendingFiles == 5_000)
        let ready = agg.due(now: at(6))
        #expect(ready.count == 5_000)
        #expect(agg.isEmpty && agg.nextDeadline == nil)
    }
}
