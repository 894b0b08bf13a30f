import Foundation
import PhotolalaCore
import Testing
import Ingest

@Suite struct IngestOptionsTests {
    func settings(_ edit: (inout Settings) -> Void = { _ in }) -> Settings {
        var s = Settings()
        s.watch.folders = ["/srv/photos"]
        edit(&s)
        return s
    }

    @Test func mapsTheWatchSection() {
        let o = IngestService.Options(settings {
            $0.watch.settle = .seconds(7)
            $0.watch.followSymlinks = true
            $0.watch.rescanInterval = nil
        }, hashWorkers: 3)
        #expect(o.watcher.folders == ["/srv/photos"])
        #expect(o.watcher.settle == .seconds(7))
        #expect(o.watcher.followSymlinks)
        #expect(o.rescanInterval == nil)
        #expect(o.hashWorkers == 3)
        #expect(o.settleRule == .init(settle: .seconds(7)))
    }

    @Test func atLeastOneHasher() {
        #expect(IngestService.Options(settings(), hashWorkers: 0).hashWorkers == 1)
    }

    @Test func sameSettingsSameOptionsSoReloadIsANoOp() {
        #expect(IngestService.Options(settings(), hashWorkers: 2) == IngestService.Options(settings(), hashWorkers: 2))
        #expect(IngestService.Options(settings(), hashWorkers: 2)
            != IngestService.Options(settings { $0.watch.exclude = ["*.tmp"] }, hashWorkers: 2))
    }

    @Test func recoveryBackoffIsFiveSecondsDoublingToFiveMinutes() {
        var b = WriteRecovery.schedule
        let delays = (0..<8).map { _ in b.fail(random: 0.7) }
        #expect(delays == [5, 10, 20, 40, 80, 160, 300, 300])
    }
}
