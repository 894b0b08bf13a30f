#if canImport(Glibc)
import Glibc
#endif
import Testing
import Watcher

/// "Is this path inside that folder" is byte for byte everywhere in the watcher: a folder
/// named "Café" as a Mac client writes it (NFD) is not the "Café" a Linux client writes
/// (NFC), though Swift's `==` and `hasPrefix` say it is.
@Suite struct ByteExactContainmentTests {
    let nfc = "Caf\u{E9}", nfd = "Cafe\u{301}"

    @Test("a removed folder takes nothing pending in its Unicode twin with it")
    func aggregatorRemoval() {
        var agg = SettleAggregator<ContinuousClock.Instant>(settle: .seconds(5), maxHold: .seconds(60), rollUpThreshold: 4)
        let now = ContinuousClock.now
        agg.fileWritten("/p/\(nfd)/a.jpg", now: now)
        agg.fileWritten("/p/\(nfc)/b.jpg", now: now)
        agg.removed("/p/\(nfc)")
        #expect(agg.pendingFiles == 1)
        #expect(agg.due(now: now + .seconds(5)) == [.file("/p/\(nfd)/a.jpg")])
    }

    @Test("a recursive scan of a folder does not absorb the files pending in its twin")
    func aggregatorScanAbsorbs() {
        var agg = SettleAggregator<ContinuousClock.Instant>(settle: .seconds(5), maxHold: .seconds(60), rollUpThreshold: 4)
        let now = ContinuousClock.now
        agg.fileWritten("/p/\(nfd)/a.jpg", now: now)
        agg.fileWritten("/p/\(nfc)/b.jpg", now: now)
        agg.directoryScanRequested("/p/\(nfc)", recursive: true, now: now)
        #expect(agg.pendingFiles == 1)
    }

    @Test("a path is checked below its folder by bytes, and below / too")
    func filterPaths() {
        let filter = PathFilter(options: WatcherOptions(folders: ["/srv/\(nfc)"]))
        #expect(filter.accepts(filePath: "/srv/\(nfc)/a.jpg", under: "/srv/\(nfc)"))
        #expect(!filter.accepts(filePath: "/srv/\(nfd)/a.jpg", under: "/srv/\(nfc)"))
        #expect(!filter.accepts(filePath: "/srv/\(nfc)", under: "/srv/\(nfc)"))
        #expect(filter.accepts(filePath: "/a.jpg", under: "/"))
        #expect(filter.accepts(filePath: "/srv/a.jpg", under: "//"))
        #expect(!filter.accepts(filePath: "/srv/.x/a.jpg", under: "/"))
    }

    @Test("a followed link into the twin of a watched folder is scanned: it is another folder")
    func scannerCoveredRoots() {
        let tmp = TempDir("scan")
        defer { tmp.remove() }
        mkdirs(tmp(nfc))
        mkdirs(tmp(nfd))
        mkdirs(tmp("scan"))
        writeFile(tmp("\(nfd)/twin.jpg"))
        writeFile(tmp("\(nfc)/own.jpg"))
        symlink(tmp(nfd), tmp("scan/to-twin"))
        symlink(tmp(nfc), tmp("scan/to-watched"))
        let scanner = DirectoryScanner(filter: PathFilter(options: WatcherOptions(folders: [])), followSymlinks: true,
                                       coveredRoots: [tmp(nfc)])
        var files: [String] = []
        _ = scanner.scan(tmp("scan")) { batch in files += batch.flatMap(\.files).map(\.path) }
        #expect(files.map { Array($0.utf8) } == [Array(tmp("scan/to-twin/twin.jpg").utf8)])
    }
}
