#if canImport(Glibc)
import Glibc
#endif
import Testing
import Watcher

@Suite struct DirectoryScannerTests {
    func scanAll(_ root: String, recursive: Bool = true, options: WatcherOptions? = nil, batchSize: Int = 1000)
        -> (files: [ScannedFile], listings: [ScannedDirectory], summary: ScanSummary) {
        let opts = options ?? WatcherOptions(folders: [root])
        let scanner = DirectoryScanner(filter: PathFilter(options: opts), followSymlinks: opts.followSymlinks, batchSize: batchSize)
        var listings: [ScannedDirectory] = []
        let summary = scanner.scan(root, recursive: recursive) { listings.append(contentsOf: $0) }
        return (listings.flatMap(\.files), listings, summary)
    }

    @Test func countsFilesAndDirectoriesAndAppliesTheFilter() {
        let tmp = TempDir("scan")
        defer { tmp.remove() }
        for dir in ["sub/deep", "empty", "@eaDir", ".git", "Private", "sub/#recycle"] { mkdirs(tmp(dir)) }
        for file in ["a.jpg", "b.JPG", "notes.txt", ".hidden.jpg", "@eaDir/t.jpg", "sub/c.heic", "sub/d.jpg.part",
                     "sub/deep/e.png", "Private/f.jpg", "sub/#recycle/g.jpg", "SYNOFILE_THUMB_S.jpg", "Thumbs.db", ".git/x.jpg"] {
            writeFile(tmp(file))
        }
        let options = WatcherOptions(folders: [tmp.path], exclude: ["Priv*"])
        let (files, listings, summary) = scanAll(tmp.path, options: options)
        #expect(Set(files.map(\.path)) == [tmp("a.jpg"), tmp("b.JPG"), tmp("sub/c.heic"), tmp("sub/deep/e.png")])
        #expect(summary.files == 4)
        #expect(summary.directories == 4)
        #expect(summary.visitedDirectories == [tmp.path, tmp("sub"), tmp("sub/deep"), tmp("empty")])
        #expect(Set(listings.map(\.path)) == summary.visitedDirectories)
        #expect(summary.rootListed && summary.unreadable.isEmpty && summary.invalidNameCount == 0)
        #expect(summary.bytes == Int64(4 * "photo bytes".utf8.count))
    }

    @Test func reportsTheIdentityTheQueueCompares() throws {
        let tmp = TempDir("scan")
        defer { tmp.remove() }
        writeFile(tmp("a.jpg"), "twelve bytes")
        var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 123_456_789), timespec(tv_sec: 1_700_000_000, tv_nsec: 987_654_321)]
        #expect(utimensat(AT_FDCWD, tmp("a.jpg"), &times, 0) == 0)
        let st = statOf(tmp("a.jpg"))
        let file = try #require(scanAll(tmp.path).files.first)
        #expect(file == ScannedFile(path: tmp("a.jpg"), device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: 12,
                                    mtimeSeconds: 1_700_000_000, mtimeNanoseconds: 987_654_321))
    }

    @Test func nonRecursiveListsOneDirectory() {
        let tmp = TempDir("scan")
        defer { tmp.remove() }
        mkdirs(tmp("sub"))
        writeFile(tmp("a.jpg"))
        writeFile(tmp("sub/b.jpg"))
        let (files, listings, summary) = scanAll(tmp.path, recursive: false)
        #expect(files.map(\.path) == [tmp("a.jpg")])
        #expect(listings.count == 1 && summary.directories == 1)
    }

    @Test func aBigDirectoryIsNeverSplitAcrossListings() {
        let tmp = TempDir("scan")
        defer { tmp.remove() }
        mkdirs(tmp("big"))
        for i in 0..<450 { writeFile(tmp("big/\(i).jpg")) }
        for i in 0..<30 {
            mkdirs(tmp("small\(i)"))
            writeFile(tmp("small\(i)/x.jpg"))
        }
        let scanner = DirectoryScanner(filter: PathFilter(options: WatcherOptions(folders: [])), batchSize: 100)
        var batches = 0
        var listings: [ScannedDirectory] = []
        let summary = scanner.scan(tmp.path) { batch in
            batches += 1
            listings.append(contentsOf: batch)
        }
        #expect(batches > 1)
        #expect(listings.filter { $0.path == tmp("big") }.count == 1)
        #expect(listings.first { $0.path == tmp("big") }?.files.count == 450)
        #expect(summary.files == 480 && summary.directories == 32)
    }

    @Test func symlinksAreSkippedUnlessFollowed() {
        let tmp = TempDir("scan")
        let outside = TempDir("outside")
        defer { tmp.remove(); outside.remove() }
        writeFile(outside("o.jpg"))
        writeFile(tmp("real.jpg"))
        symlink(outside.path, tmp("linked-dir"))
        symlink(outside("o.jpg"), tmp("linked.jpg"))
        symlink(tmp("nowhere.jpg"), tmp("dangling.jpg"))

        let plain = scanAll(tmp.path)
        #expect(plain.files.map(\.path) == [tmp("real.jpg")])

        let followed = scanAll(tmp.path, options: WatcherOptions(folders: [tmp.path], followSymlinks: true))
        #expect(Set(followed.files.map(\.path)) == [tmp("real.jpg"), tmp("linked.jpg"), tmp("linked-dir/o.jpg")])
        let target = statOf(outside("o.jpg"))
        #expect(followed.files.first { $0.path == tmp("linked.jpg") }?.inode == UInt64(target.st_ino), "a followed link reports its target")
    }

    @Test func symlinkLoopsTerminateWhenFollowing() {
        let tmp = TempDir("scan")
        defer { tmp.remove() }
        mkdirs(tmp("a/b"))
        writeFile(tmp("a/b/x.jpg"))
        symlink(tmp.path, tmp("a/b/up"))
        symlink("..", tmp("a/loop"))
        symlink(tmp("a"), tmp("again"))
        let (files, _, summary) = scanAll(tmp.path, options: WatcherOptions(folders: [tmp.path], followSymlinks: true))
        #expect(files.count == 1)
        #expect(summary.directories == 3, "each directory once, by (device, inode)")
    }

    @Test func aScanOfASubdirectoryDoesNotFollowLinksBackIntoTheWatchedFolder() {
        // A new subdirectory's own scan does not know the rest of the tree: a link back up
        // listed the whole folder again under alias paths.
        let tmp = TempDir("scan")
        defer { tmp.remove() }
        let outside = TempDir("outside")
        defer { outside.remove() }
        mkdirs(tmp("old"))
        writeFile(tmp("old/x.jpg"))
        mkdirs(tmp("new"))
        writeFile(tmp("new/y.jpg"))
        writeFile(outside("o.jpg"))
        symlink(tmp.path, tmp("new/root"))
        symlink(tmp("old"), tmp("new/old-again"))
        symlink(outside.path, tmp("new/elsewhere"))
        let options = WatcherOptions(folders: [tmp.path], followSymlinks: true)
        let scanner = DirectoryScanner(options: options)
        var listings: [ScannedDirectory] = []
        _ = scanner.scan(tmp("new")) { listings.append(contentsOf: $0) }
        #expect(Set(listings.flatMap(\.files).map(\.path)) == [tmp("new/y.jpg"), tmp("new/elsewhere/o.jpg")])
    }

    @Test func specialFilesAreSkipped() {
        let tmp = TempDir("scan")
        defer { tmp.remove() }
        #expect(mkfifo(tmp("pipe.jpg"), 0o644) == 0)
        let sock = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let socketPath = tmp("sock.jpg")
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            socketPath.utf8CString.withUnsafeBytes { raw.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(raw.count - 1))) }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(sock, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        defer { close(sock) }
        #expect(bound == 0)
        writeFile(tmp("real.jpg"))
        let (files, _, summary) = scanAll(tmp.path)
        #expect(files.map(\.path) == [tmp("real.jpg")])
        #expect(summary.unreadable.isEmpty)
    }

    @Test func namesThatAreNotUTF8AreSkippedAndReported() {
        let tmp = TempDir("scan")
        defer { tmp.remove() }
        writeFile(tmp("good.jpg"))
        // "bad<FF>.jpg" and a directory "dir<FE>" holding a photo.
        var bad = Array((tmp.path + "/bad").utf8CString.dropLast())
        bad += [CChar(bitPattern: 0xFF), 0x2E, 0x6A, 0x70, 0x67, 0]
        let fd = bad.withUnsafeBufferPointer { open($0.baseAddress!, O_WRONLY | O_CREAT, 0o644) }
        #expect(fd >= 0)
        close(fd)
        var badDir = Array((tmp.path + "/dir").utf8CString.dropLast())
        badDir += [CChar(bitPattern: 0xFE), 0]
        #expect(badDir.withUnsafeBufferPointer { mkdir($0.baseAddress!, 0o755) } == 0)

        let (files, _, summary) = scanAll(tmp.path)
        #expect(files.map(\.path) == [tmp("good.jpg")])
        #expect(summary.invalidNameCount == 2)
        #expect(Set(summary.invalidNames) == [tmp("bad\u{FFFD}.jpg"), tmp("dir\u{FFFD}")])
    }

    @Test func unreadableDirectoriesAreReportedAndTheWalkGoesOn() throws {
        // Tests run as root, which reads a mode-000 directory anyway. setfsuid(2) is per
        // thread and, leaving uid 0, drops CAP_DAC_OVERRIDE from this thread only; the scan
        // below is synchronous, so it stays on this thread. (The Glibc module lacks
        // <sys/fsuid.h>, hence dlsym.)
        typealias SetFsuid = @convention(c) (UInt32) -> Int32
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "setfsuid") else { return }
        let setfsuid = unsafeBitCast(symbol, to: SetFsuid.self)

        let tmp = TempDir("scan")
        defer { tmp.remove() }
        chmod(tmp.path, 0o755)
        mkdirs(tmp("open"))
        mkdirs(tmp("secret/inner"))
        writeFile(tmp("open/a.jpg"))
        writeFile(tmp("secret/s.jpg"))
        chmod(tmp("secret"), 0)

        let previous = setfsuid(65534)
        let probe = opendir(tmp("secret"))
        if let probe { closedir(probe) }
        let result = scanAll(tmp.path)
        _ = setfsuid(UInt32(bitPattern: previous))
        guard probe == nil else {
            // Still readable (a kernel or sandbox keeping the capability): nothing to check.
            return
        }
        #expect(result.files.map(\.path) == [tmp("open/a.jpg")])
        #expect(result.summary.unreadable.map(\.path) == [tmp("secret")])
        #expect(result.summary.unreadable.first?.reason == String(cString: strerror(EACCES)))
        #expect(!result.summary.visitedDirectories.contains(tmp("secret")))
        #expect(result.summary.rootListed)
    }

    @Test func aMissingRootIsReportedNotListed() {
        let (files, _, summary) = scanAll("/tmp/photolala-does-not-exist-\(getpid())")
        #expect(files.isEmpty)
        #expect(!summary.rootListed)
        #expect(summary.unreadable.count == 1)
    }

    @Test func theAsyncScanYieldsTheSameAndEndsWithTheSummary() async {
        let tmp = TempDir("scan")
        defer { tmp.remove() }
        for i in 0..<20 {
            mkdirs(tmp("d\(i)"))
            for j in 0..<60 { writeFile(tmp("d\(i)/\(j).jpg")) }
        }
        let scanner = DirectoryScanner(filter: PathFilter(options: WatcherOptions(folders: [])), batchSize: 250)
        // Two scans at once take turns on the one low-priority thread.
        async let first = collect(scanner.batches(tmp.path))
        async let second = collect(scanner.batches(tmp("d3")))
        let (a, b) = await (first, second)
        #expect(a.files.count == 1200 && a.summary?.files == 1200 && a.summary?.directories == 21)
        #expect(a.batches > 1)
        #expect(b.files.count == 60 && b.summary?.directories == 1)
        #expect(a.summaryWasLast && b.summaryWasLast)
    }

    struct Collected {
        var files: [ScannedFile] = []
        var batches = 0
        var summary: ScanSummary?
        var summaryWasLast = true
    }

    func collect(_ stream: AsyncStream<ScanOutput>) async -> Collected {
        var collected = Collected()
        for await output in stream {
            if collected.summary != nil { collected.summaryWasLast = false }
            switch output {
            case .directories(let batch):
                collected.batches += 1
                collected.files += batch.flatMap(\.files)
            case .finished(let summary):
                collected.summary = summary
            }
        }
        return collected
    }

    @Test func droppingTheStreamStopsTheScan() async {
        let tmp = TempDir("scan")
        defer { tmp.remove() }
        for i in 0..<10 {
            mkdirs(tmp("d\(i)"))
            writeFile(tmp("d\(i)/x.jpg"))
        }
        let scanner = DirectoryScanner(filter: PathFilter(options: WatcherOptions(folders: [])), batchSize: 1)
        var seen = 0
        for await output in scanner.batches(tmp.path) {
            if case .directories = output { seen += 1 }
            if seen == 2 { break }
        }
        #expect(seen == 2)
        // The worker is free again for the next scan.
        let again = await collect(scanner.batches(tmp("d1")))
        #expect(again.files.count == 1)
    }
}
