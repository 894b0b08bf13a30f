import Control
import ManifestFormat
import RestoreWire
import RestoreFiles
import Testing
@testable import RestoreCtl

@Suite struct RestoreTallyTests {
    func item(_ n: UInt64, size: Int64 = 10) -> RestoreItem {
        RestoreItem(folder: "/p", path: Array("\(n).jpg".utf8), version: FileVersion(size: size, md5: MD5Value(high: n, low: n), mtimeSec: 0, mtimeNsec: 0),
                    root: "/p", destination: Array("\(n).jpg".utf8))
    }

    func status(_ i: RestoreItem, _ state: ObjectStatus.State, message: String? = nil) -> (String, ObjectStatus) {
        (i.version.md5.hex, ObjectStatus(md5: i.version.md5.hex, state: state, message: message))
    }

    @Test func eachOutcomeCountsOnceAndNamesItsFile() {
        var t = RestoreTally()
        t.record(item(1, size: 5), .restored)
        t.record(item(2, size: 7), .alreadyThere)
        t.record(item(3), .kept("a folder is there"))
        t.record(item(4), .failed("no room"))
        t.record(item(5), .archived)
        #expect(t.progress.restored == 1 && t.progress.alreadyThere == 1 && t.progress.kept == 1 && t.progress.failed == 2)
        #expect(t.progress.bytesDone == 12 && t.progress.filesDone == 5)
        #expect(t.problems.map(\.kind) == ["kept", "failed", "failed"])
        #expect(t.problems[0].message == "/p/3.jpg: a folder is there" && t.problems[0].path == "/p/3.jpg")
        #expect(t.problems[2].message.hasSuffix("went back to an archive class; run the command again"))
    }

    @Test func archivedFilesWaitUntilReadyMissingOrUnknownFiveTimes() {
        let (a, b, c, d) = (item(1), item(2), item(3), item(4))
        var wait = ArchiveWait([a, b, c, d])
        #expect(wait.nextWait() == 2 && wait.nextWait() == 4)
        var answer = wait.answered(Dictionary(uniqueKeysWithValues: [status(a, .ready), status(b, .restoring), status(c, .unknown, message: "503")]))
        #expect(answer.ready == [a])
        // d was not answered at all: not in the bucket.
        #expect(answer.gaveUp.map(\.item) == [d] && answer.gaveUp[0].why == "its object (\(d.version.md5.hex)) is not in the bucket")
        #expect(wait.waiting == [b, c] && wait.md5s == [b.version.md5.hex, c.version.md5.hex])
        // A file became readable: the next question comes soon again.
        #expect(wait.nextWait() == 2)
        for _ in 1...3 {
            answer = wait.answered(Dictionary(uniqueKeysWithValues: [status(b, .restoring), status(c, .unknown, message: "503")]))
            #expect(answer.ready.isEmpty && answer.gaveUp.isEmpty)
        }
        answer = wait.answered(Dictionary(uniqueKeysWithValues: [status(b, .restoring), status(c, .unknown, message: "503")]))
        #expect(answer.gaveUp.map(\.item) == [c] && answer.gaveUp[0].why == "503")
        #expect(wait.waiting == [b])
    }
}
