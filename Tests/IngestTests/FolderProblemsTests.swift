import Foundation
import Testing
@testable import Ingest

@Suite struct FolderProblemsTests {
    typealias U = FolderProblems.Unreadable

    @Test func nothingFoundSaysNothing() {
        #expect(FolderProblems().statusLines().isEmpty)
    }

    @Test func newUnreadableFoldersAreReportedOnce() {
        var p = FolderProblems()
        let first = p.scanned("/p", recursive: true, invalidNameCount: 0, invalidNames: [],
                              unreadable: [U(path: "/p/locked", reason: "Permission denied")])
        #expect(first == [U(path: "/p/locked", reason: "Permission denied")])
        let again = p.scanned("/p", recursive: true, invalidNameCount: 0, invalidNames: [],
                              unreadable: [U(path: "/p/locked", reason: "Permission denied")])
        #expect(again.isEmpty, "known already: no second log line")
        #expect(p.statusLines() == ["1 folder cannot be read by the daemon: /p/locked (Permission denied)"])
    }

    @Test func aLaterScanThatReadsTheFolderClearsIt() {
        var p = FolderProblems()
        _ = p.scanned("/p", recursive: true, invalidNameCount: 0, invalidNames: [], unreadable: [U(path: "/p/a", reason: "x")])
        _ = p.scanned("/q", recursive: true, invalidNameCount: 0, invalidNames: [], unreadable: [])
        #expect(p.unreadable.count == 1, "a scan of another folder says nothing of /p")
        _ = p.scanned("/p", recursive: true, invalidNameCount: 0, invalidNames: [], unreadable: [])
        #expect(p.unreadable.isEmpty)
    }

    @Test func clearingIsByteExact() {
        var p = FolderProblems()
        _ = p.scanned("/Cafe\u{301}", recursive: true, invalidNameCount: 0, invalidNames: [],
                      unreadable: [U(path: "/Cafe\u{301}/x", reason: "x")])
        _ = p.scanned("/Caf\u{E9}", recursive: true, invalidNameCount: 0, invalidNames: [], unreadable: [])
        #expect(p.unreadable.count == 1, "the NFC twin's scan says nothing of the NFD folder")
    }

    @Test func manyUnreadableFoldersShowFiveAndAnEllipsis() {
        var p = FolderProblems()
        let found = (1...7).map { U(path: "/p/\($0)", reason: "Permission denied") }
        _ = p.scanned("/p", recursive: true, invalidNameCount: 0, invalidNames: [], unreadable: found)
        let line = p.statusLines()[0]
        #expect(line.hasPrefix("7 folders cannot be read by the daemon: /p/1 (Permission denied)"))
        #expect(line.hasSuffix(", …"))
        #expect(!line.contains("/p/6"))
    }

    @Test func invalidNamesAreCountedWithSamplesAndAdvice() {
        var p = FolderProblems()
        _ = p.scanned("/p", recursive: true, invalidNameCount: 1, invalidNames: ["caf\u{FFFD}.jpg"], unreadable: [])
        #expect(p.statusLines() == ["1 file or folder is not backed up: the name is not valid UTF-8 (\"caf\u{FFFD}.jpg\"); rename it (for example with convmv -f latin1 -t utf-8)"])
        _ = p.scanned("/p/sub", recursive: false, invalidNameCount: 4, invalidNames: ["a", "b", "c", "d"], unreadable: [])
        let line = p.statusLines()[0]
        #expect(line.hasPrefix("5 files or folders are not backed up: the names are not valid UTF-8"))
        #expect(line.contains(", …"))
    }

    @Test func aRecursiveScanReplacesWhatSubfolderScansFound() {
        var p = FolderProblems()
        _ = p.scanned("/p/sub", recursive: false, invalidNameCount: 2, invalidNames: ["a", "b"], unreadable: [])
        _ = p.scanned("/p", recursive: true, invalidNameCount: 0, invalidNames: [], unreadable: [])
        #expect(p.statusLines().isEmpty)
    }

    @Test func adviceForOverlongPathsIsNotAboutPermissions() {
        #expect(FolderProblems.advice(for: String(cString: strerror(ENAMETOOLONG))).contains("longer than the system allows"))
        #expect(FolderProblems.advice(for: "Permission denied").contains("read access"))
    }
}
