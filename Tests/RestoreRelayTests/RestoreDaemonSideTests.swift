import Bucket
import Control
import Foundation
import ManifestFormat
import PhotolalaCore
import RestoreWire
import Testing
import RestoreRelay

@Suite struct RestoreDaemonSideTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func smallObjectsInOneGetBigOnesInRanges() {
        let whole: [ClosedRange<Int64>] = [0...((16 << 20) - 1)]
        #expect(RangePlan(size: 16 << 20, threshold: 16 << 20, rangeSize: 8 << 20).ranges == whole)
        let mib: Int64 = 1 << 20
        let big = RangePlan(size: 20 * mib + 5, threshold: 16 * mib, rangeSize: 8 * mib)
        #expect(big.isRanged)
        let expected: [ClosedRange<Int64>] = [0...(8 * mib - 1), (8 * mib)...(16 * mib - 1), (16 * mib)...(20 * mib + 4)]
        #expect(big.ranges == expected)
        #expect(RangePlan(size: 0, threshold: 16, rangeSize: 8).ranges.isEmpty)
    }

    @Test func statusShowsTheLatestLiveRestore() {
        var s = RestoreSessions()
        #expect(s.current(now: t0, rate: 0) == nil)
        let id = s.update(RestoreReport(device: "nas-old", filesTotal: 10, bytesTotal: 1000), now: t0)
        _ = s.update(RestoreReport(id: id, device: "nas-old", filesDone: 4, filesTotal: 10, bytesDone: 400, bytesTotal: 1000), now: t0.addingTimeInterval(1))
        let shown = s.current(now: t0.addingTimeInterval(2), rate: 100)
        #expect(shown?.filesDone == 4 && shown?.etaSeconds == 6 && shown?.device == "nas-old")
        #expect(shown?.startedAt == Timestamp.string(t0))
        // A command killed stops reporting: its restore leaves status after a minute.
        #expect(s.current(now: t0.addingTimeInterval(62), rate: 0) == nil)
        _ = s.update(RestoreReport(id: id, device: "nas-old", filesDone: 10, filesTotal: 10, finished: true), now: t0.addingTimeInterval(3))
        #expect(s.current(now: t0.addingTimeInterval(3), rate: 0) == nil)
    }

    @Test func anArchivedRestoreShowsItsWait() {
        var s = RestoreSessions()
        _ = s.update(RestoreReport(device: "d", filesTotal: 1, bytesTotal: 10, waitingArchived: 1, archiveClass: "GLACIER"), now: t0)
        let shown = s.current(now: t0, rate: 5)
        #expect(shown?.etaSeconds == nil && shown?.archiveWait == "usually 3 to 5 hours" && shown?.waitingArchived == 1)
        #expect(ArchiveClass.needsThaw("DEEP_ARCHIVE") && ArchiveClass.needsThaw("GLACIER"))
        #expect(!ArchiveClass.needsThaw("GLACIER_IR") && !ArchiveClass.needsThaw("STANDARD") && !ArchiveClass.needsThaw(nil))
    }

    @Test func manifestFramesSurviveAnySplit() throws {
        var report = ManifestReader.Report()
        report.segments = 2
        report.problems = ["p"]
        let stream = ManifestFrames.segment([1, 2, 3]) + ManifestFrames.segment(Array(repeating: 9, count: 300)) + ManifestFrames.report(report)
        for cut in [1, 3, 5, 7, 64, stream.count] {
            var reader = ManifestFrames.Reader()
            var frames: [ManifestFrames.Frame] = []
            var i = 0
            while i < stream.count {
                let piece = Array(stream[i..<min(stream.count, i + cut)])
                frames += try piece.withUnsafeBytes { try reader.feed($0) }
                i += cut
            }
            #expect(frames == [.segment([1, 2, 3]), .segment(Array(repeating: 9, count: 300)), .report(report)])
        }
        var bad = ManifestFrames.Reader(maxFrame: 10)
        #expect(throws: ManifestFrames.FrameError.self) { try ManifestFrames.segment(Array(repeating: 0, count: 11)).withUnsafeBytes { try bad.feed($0) } }
    }

    @Test func failuresBeforeTheFirstByteAreAnswersTheCommandCanActOn() throws {
        func said(_ error: S3Error, key: String? = nil) throws -> (Int, String)? {
            guard let r = Refusal(error, key: key)?.response else { return nil }
            return (r.status, try ControlJSON.decode(ControlReply.self, from: r.body).message)
        }
        #expect(try said(.unavailable(.cancelled))! == (503, "photolalad is stopping"))
        #expect(try said(.unavailable(.signedOut))! == (503, "this NAS is not signed in: run `photolalactl login`"))
        let archived = S3Error(kind: .forbidden, status: 403, code: "InvalidObjectState", message: "archived")
        #expect(try said(archived, key: "photos/U/m.dat")?.0 == 409)
        let missing = S3Error(kind: .notFound, status: 404, code: "NoSuchKey", message: "gone")
        #expect(try said(missing, key: "photos/U/m.dat")! == (404, "photos/U/m.dat is not in the bucket"))
        // Without a key (a listing), a missing object is the bucket's failure: a 502.
        #expect(try said(missing) == nil)
        #expect(try said(S3Error(kind: .transient, status: 503, code: "SlowDown", message: "slow down")) == nil)
    }
}
