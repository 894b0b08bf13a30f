import PhotolalaCore
import Testing
import Watcher

@Suite struct WatcherOptionsTests {
    @Test("a missing folder is retried after 1 s, doubling to 5 minutes; unwatched directories every minute, doubling to 30")
    func defaultSchedules() {
        let options = WatcherOptions(folders: ["/srv/photos"])
        var missing = options.missingFolderRetry
        let waits = (0..<11).map { _ in missing.failDuration() }
        #expect(waits == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300].map { Duration.seconds($0) })

        var unwatched = options.unwatchedRescan
        #expect((0..<7).map { _ in unwatched.failDuration() }
            == [60, 120, 240, 480, 960, 1800, 1800].map { Duration.seconds($0) })
        unwatched.reset()
        #expect(unwatched.failDuration() == .seconds(60))
    }

    @Test("the log line names the rescan interval as the config spells durations")
    func humanDurations() {
        #expect(InotifyLimit.human(Backoff.duration(WatcherOptions(folders: []).unwatchedRescan.base)) == "1m")
        #expect(InotifyLimit.human(.seconds(7200)) == "2h")
        #expect(InotifyLimit.human(.seconds(90)) == "90s")
        #expect(InotifyLimit.human(.milliseconds(150)) == "150ms")
    }
}
