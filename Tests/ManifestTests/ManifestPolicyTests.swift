import Foundation
import PhotolalaCore
import Testing
import Manifest

@Suite struct ManifestPolicyTests {
    let p = ManifestPolicy()
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func changesWaitLongerWhileUploadsGoOn() {
        #expect(p.flush(pending: 10, waitingSince: t0, uploadsInFlight: true, now: t0) == .at(t0.addingTimeInterval(60)))
        #expect(p.flush(pending: 10, waitingSince: t0, uploadsInFlight: false, now: t0) == .at(t0.addingTimeInterval(2)))
        #expect(p.flush(pending: 10, waitingSince: t0, uploadsInFlight: false, now: t0.addingTimeInterval(2)) == .now)
        #expect(p.flush(pending: 10, waitingSince: t0, uploadsInFlight: true, now: t0.addingTimeInterval(61)) == .now)
    }

    @Test func aFullSegmentIsWrittenAtOnce() {
        #expect(p.flush(pending: p.maxEntriesPerSegment, waitingSince: t0, uploadsInFlight: true, now: t0) == .now)
    }

    @Test func compactionWaitsForTheLogToMatter() {
        #expect(!p.shouldCompact(logEntries: 0, logSegments: 0, snapshotEntries: 0))
        #expect(!p.shouldCompact(logEntries: 9_999, logSegments: 5, snapshotEntries: 0))
        #expect(p.shouldCompact(logEntries: 10_000, logSegments: 5, snapshotEntries: 0))
        #expect(!p.shouldCompact(logEntries: 400_000, logSegments: 20, snapshotEntries: 1_000_000))
        #expect(p.shouldCompact(logEntries: 500_000, logSegments: 25, snapshotEntries: 1_000_000))
        #expect(p.shouldCompact(logEntries: 200, logSegments: 200, snapshotEntries: 1_000_000))
    }

    @Test func theTestKnobShortensTheLog() {
        var settings = Settings()
        settings.watch.folders = ["/p"]
        settings.account.deviceName = "nas"
        let o = ManifestService.Options(settings, environment: ["PHOTOLALAD_MANIFEST_COMPACT_SEGMENTS": "3"])
        #expect(o.policy.maxLogSegments == 3 && o.folders == ["/p"] && o.deviceName == "nas")
        #expect(ManifestService.Options(settings, environment: [:]).policy.maxLogSegments == 200)
    }
}
