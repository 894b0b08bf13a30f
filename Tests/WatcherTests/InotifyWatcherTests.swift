#if canImport(Glibc)
import Glibc
#endif
import CoreMetrics
import Logging
import MetricsTestKit
import PhotolalaCore
import Testing
@testable import Watcher

/// Through real inotify, in temporary folders.
@Suite struct InotifyWatcherTests {
    struct Running {
        let watcher: InotifyWatcher
        let log: EventLog
        let logs: CapturingLogHandler.Store

        func stop() async {
            watcher.stop()
            await log.finished()
        }
    }

    func start(_ options: WatcherOptions, watchBudget: Int? = nil, waitForInitial: Bool = true) async throws -> Running {
        let (logger, store) = capturingLogger()
        let watcher = InotifyWatcher(options: options, logger: logger, watchBudget: watchBudget)
        let log = EventLog(watcher.events())
        try watcher.start()
        if waitForInitial {
            let ready = await log.wait { events in
                options.folders.allSatisfy { folder in
                    events.contains(.scanNeeded(folder, .initial)) || events.contains(.folderMissing(folder))
                }
            }
            #expect(ready, "the initial walk reports every folder")
        }
        return Running(watcher: watcher, log: log, logs: store)
    }

    @Test func aWrittenFileIsReportedAndOthersAreNot() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        let run = try await start(testOptions([tmp.path]))
        writeFile(tmp("notes.txt"))
        writeFile(tmp(".hidden.jpg"))
        writeFile(tmp("a.jpg.part"))
        writeFile(tmp("a.jpg"))
        #expect(await run.log.wait(for: .fileWritten(tmp("a.jpg"))))
        // Renaming a partial download to its final name is "moved in", not a move.
        rename(tmp("a.jpg.part"), tmp("b.jpg"))
        #expect(await run.log.wait(for: .fileWritten(tmp("b.jpg"))))
        // A hard link is complete at once: no CLOSE_WRITE will come.
        link(tmp("a.jpg"), tmp("c.jpg"))
        #expect(await run.log.wait(for: .fileWritten(tmp("c.jpg"))))
        await run.stop()
        let written = run.log.all.compactMap { if case .fileWritten(let p) = $0 { p } else { nil } }
        #expect(Set(written) == [tmp("a.jpg"), tmp("b.jpg"), tmp("c.jpg")])
        #expect(run.watcher.snapshot().directories == 1)
    }

    @Test func aDeepNewTreeIsWatchedAndScannedSoNothingIsMissed() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        let run = try await start(testOptions([tmp.path]))
        // mkdir -p a/b/c && cp x.jpg a/b/c/ — faster than the watcher can add watches.
        mkdirs(tmp("a/b/c"))
        writeFile(tmp("a/b/c/x.jpg"))
        #expect(await run.log.wait(for: .scanNeeded(tmp("a"), .newDirectory)))
        #expect(await run.log.wait { _ in run.watcher.snapshot().directories == 4 })
        // The driver's view: events plus scans of what `.scanNeeded` named.
        let events = run.log.all
        let written = events.compactMap { if case .fileWritten(let p) = $0 { p } else { nil } }
        let toScan = events.compactMap { if case .scanNeeded(let p, _) = $0 { p } else { nil } }
        #expect(Set(written).union(scannedPaths(toScan, options: run.watcher.options)).contains(tmp("a/b/c/x.jpg")))
        // Watches exist below now: a later file is evented.
        writeFile(tmp("a/b/c/y.jpg"))
        #expect(await run.log.wait(for: .fileWritten(tmp("a/b/c/y.jpg"))))
        await run.stop()
    }

    @Test func filesWrittenJustBeforeTheirDirectoryIsRenamedAreStillReported() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        mkdirs(tmp("burst"))
        let run = try await start(testOptions([tmp.path]))
        // The watcher reads these CLOSE_WRITEs after the rename: their old paths no longer
        // resolve, yet each must be handed on (the driver carries it to the new name).
        let names = (0..<40).map { "b\($0).jpg" }
        for name in names { writeFile(tmp("burst/\(name)")) }
        rename(tmp("burst"), tmp("renamed"))
        #expect(await run.log.wait(for: .directoryMoved(from: tmp("burst"), to: tmp("renamed"))))
        await run.stop()
        let written = Set(run.log.all.compactMap { if case .fileWritten(let p) = $0 { p } else { nil } })
        #expect(written == Set(names.map { tmp("burst/\($0)") }))
    }

    @Test func movesIntoOutOfAndWithinTheTree() async throws {
        let tmp = TempDir("watch")
        let outside = TempDir("outside")
        defer { tmp.remove(); outside.remove() }
        mkdirs(tmp("sub"))
        mkdirs(outside("album/inner"))
        writeFile(outside("album/inner/p.jpg"))
        writeFile(outside("in.jpg"))
        let run = try await start(testOptions([tmp.path]))

        rename(outside("in.jpg"), tmp("in.jpg"))
        #expect(await run.log.wait(for: .fileWritten(tmp("in.jpg"))))

        rename(tmp("in.jpg"), tmp("sub/within.jpg"))
        #expect(await run.log.wait(for: .fileMoved(from: tmp("in.jpg"), to: tmp("sub/within.jpg"))))

        rename(tmp("sub/within.jpg"), outside("out.jpg"))
        #expect(await run.log.wait(for: .removed(tmp("sub/within.jpg"))))

        rename(outside("album"), tmp("album"))
        #expect(await run.log.wait(for: .scanNeeded(tmp("album"), .newDirectory)))
        #expect(await run.log.wait { _ in run.watcher.snapshot().directories == 4 })
        #expect(scannedPaths([tmp("album")], options: run.watcher.options) == [tmp("album/inner/p.jpg")])

        rename(tmp("album"), outside("gone"))
        #expect(await run.log.wait(for: .removed(tmp("album"))))
        #expect(await run.log.wait { _ in run.watcher.snapshot().directories == 2 })
        // The moved-out directory's watches were dropped: writing there reports nothing.
        run.log.clear()
        writeFile(outside("gone/inner/late.jpg"))
        writeFile(tmp("marker.jpg"))
        #expect(await run.log.wait(for: .fileWritten(tmp("marker.jpg"))))
        #expect(run.log.all == [.fileWritten(tmp("marker.jpg"))])
        await run.stop()
    }

    @Test func aRenamedDirectoryKeepsItsWatchesUnderTheNewPath() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        mkdirs(tmp("2024/raw"))
        writeFile(tmp("2024/raw/a.dng"))
        let run = try await start(testOptions([tmp.path]))
        rename(tmp("2024"), tmp("2024 Holiday"))
        #expect(await run.log.wait(for: .directoryMoved(from: tmp("2024"), to: tmp("2024 Holiday"))))
        writeFile(tmp("2024 Holiday/raw/b.dng"))
        #expect(await run.log.wait(for: .fileWritten(tmp("2024 Holiday/raw/b.dng"))))
        // Renamed again, one level deeper, then into an excluded name (= gone).
        mkdirs(tmp("archive"))
        rename(tmp("2024 Holiday"), tmp("archive/2024"))
        #expect(await run.log.wait(for: .directoryMoved(from: tmp("2024 Holiday"), to: tmp("archive/2024"))))
        writeFile(tmp("archive/2024/raw/c.dng"))
        #expect(await run.log.wait(for: .fileWritten(tmp("archive/2024/raw/c.dng"))))
        rename(tmp("archive/2024"), tmp("archive/@eaDir"))
        #expect(await run.log.wait(for: .removed(tmp("archive/2024"))))
        #expect(await run.log.wait { _ in run.watcher.snapshot().directories == 2 })
        await run.stop()
        let paths = run.log.all.flatMap { event -> [String] in
            switch event {
            case .fileWritten(let p), .removed(let p): [p]
            case .directoryMoved(let a, let b): [a, b]
            default: []
            }
        }
        #expect(!paths.contains { $0.contains("@eaDir") })
        #expect(!paths.contains(tmp("2024/raw/b.dng")), "no event under a stale path")
    }

    @Test func deletionsAreReported() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        mkdirs(tmp("d/e"))
        writeFile(tmp("d/e/x.jpg"))
        writeFile(tmp("y.jpg"))
        let run = try await start(testOptions([tmp.path]))
        #expect(run.watcher.snapshot().directories == 3)
        unlink(tmp("y.jpg"))
        #expect(await run.log.wait(for: .removed(tmp("y.jpg"))))
        unlink(tmp("d/e/x.jpg"))
        rmdir(tmp("d/e"))
        rmdir(tmp("d"))
        #expect(await run.log.wait(for: .removed(tmp("d"))))
        #expect(run.log.contains(.removed(tmp("d/e/x.jpg"))) && run.log.contains(.removed(tmp("d/e"))))
        #expect(await run.log.wait { _ in run.watcher.snapshot().directories == 1 })
        await run.stop()
    }

    @Test func aMissingFolderIsReportedRetriedAndPickedUp() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        let root = tmp("not-yet")
        let run = try await start(testOptions([root, tmp("also-missing")]))
        #expect(run.log.contains(.folderMissing(root)))
        #expect(run.watcher.snapshot().missingFolders == [root, tmp("also-missing")])
        mkdirs(root + "/sub")
        writeFile(root + "/sub/early.jpg")
        #expect(await run.log.wait(for: .scanNeeded(root, .folderAvailable)))
        #expect(run.log.contains(.folderAvailable(root)))
        #expect(run.watcher.snapshot().missingFolders == [tmp("also-missing")])
        #expect(scannedPaths([root], options: run.watcher.options) == [root + "/sub/early.jpg"])
        writeFile(root + "/sub/later.jpg")
        #expect(await run.log.wait(for: .fileWritten(root + "/sub/later.jpg")))

        // Gone again (deleted): reported, and back once more when recreated.
        run.log.clear()
        removeTree(root)
        #expect(await run.log.wait(for: .folderMissing(root)))
        #expect(run.watcher.snapshot().missingFolders.contains(root))
        mkdirs(root)
        #expect(await run.log.wait(for: .folderAvailable(root)))
        #expect(run.log.all.firstIndex(of: .folderMissing(root))! < run.log.all.firstIndex(of: .folderAvailable(root))!)
        await run.stop()
        let missingLines = run.logs.lines.withLock { $0.filter { $0.1.contains("is missing or unreadable") } }
        #expect(missingLines.count == 3, "logged once per episode, not per retry")
    }

    @Test func aVolumeMountedOnTheFolderIsPickedUpAtOnce() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        let root = tmp("volume")
        mkdirs(root)
        // Tests run as root; elsewhere (no mount permission) there is nothing to check.
        guard mount("none", root, "tmpfs", 0, "size=1m") == 0 else { return }
        umount(root)
        // A slow retry: only the mount notification can make this quick.
        var options = testOptions([root])
        options.missingFolderRetry = Backoff(base: 60, cap: 60, jitter: .none)
        let run = try await start(options)
        writeFile(root + "/underlying.jpg")
        #expect(await run.log.wait(for: .fileWritten(root + "/underlying.jpg")))
        #expect(mount("none", root, "tmpfs", 0, "size=1m") == 0)
        defer { umount2(root, Int32(MNT_DETACH)) }
        #expect(await run.log.wait(for: .scanNeeded(root, .folderAvailable), timeout: .seconds(3)))
        writeFile(root + "/on-volume.jpg")
        #expect(await run.log.wait(for: .fileWritten(root + "/on-volume.jpg")))
        run.log.clear()
        #expect(umount(root) == 0)
        #expect(await run.log.wait(for: .scanNeeded(root, .folderAvailable), timeout: .seconds(3)))
        writeFile(root + "/underlying-again.jpg")
        #expect(await run.log.wait(for: .fileWritten(root + "/underlying-again.jpg")))
        await run.stop()
    }

    @Test func fifosAndOtherSpecialFilesAreIgnored() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        let run = try await start(testOptions([tmp.path]))
        #expect(mkfifo(tmp("pipe.jpg"), 0o644) == 0)
        // Opening a FIFO read-write does not block; closing it raises CLOSE_WRITE.
        let fd = open(tmp("pipe.jpg"), O_RDWR)
        _ = write(fd, "x", 1)
        close(fd)
        writeFile(tmp("real.jpg"))
        #expect(await run.log.wait(for: .fileWritten(tmp("real.jpg"))))
        #expect(!run.log.all.contains { "\($0)".contains("pipe.jpg") })
        await run.stop()
    }

    @Test func symlinksAreNotFollowedUnlessAskedAndLoopsEnd() async throws {
        let tmp = TempDir("watch")
        let outside = TempDir("outside")
        defer { tmp.remove(); outside.remove() }
        mkdirs(tmp("a/b"))
        symlink(tmp.path, tmp("a/b/loop"))
        symlink("..", tmp("a/up"))
        symlink(outside.path, tmp("elsewhere"))

        let plain = try await start(testOptions([tmp.path]))
        #expect(plain.watcher.snapshot().directories == 3)
        writeFile(outside("o.jpg"))
        writeFile(tmp("marker.jpg"))
        #expect(await plain.log.wait(for: .fileWritten(tmp("marker.jpg"))))
        #expect(!plain.log.all.contains { "\($0)".contains("o.jpg") })
        await plain.stop()

        let followed = try await start(testOptions([tmp.path], followSymlinks: true))
        // tmp, a, b, and the outside folder through "elsewhere"; the loops add nothing.
        #expect(followed.watcher.snapshot().directories == 4)
        writeFile(outside("p.jpg"))
        #expect(await followed.log.wait(for: .fileWritten(tmp("elsewhere/p.jpg"))))
        // A new link to a directory is followed and scanned (one not reached already:
        // a directory seen twice is reported under its first path only).
        let another = TempDir("another")
        defer { another.remove() }
        symlink(another.path, tmp("more-link"))
        #expect(await followed.log.wait(for: .scanNeeded(tmp("more-link"), .newDirectory)))
        #expect(followed.watcher.snapshot().directories == 5)
        // A followed link moves like a directory, and deleting it drops the watch.
        rename(tmp("more-link"), tmp("renamed-link"))
        #expect(await followed.log.wait(for: .directoryMoved(from: tmp("more-link"), to: tmp("renamed-link"))))
        writeFile(another("x.jpg"))
        #expect(await followed.log.wait(for: .fileWritten(tmp("renamed-link/x.jpg"))))
        unlink(tmp("renamed-link"))
        #expect(await followed.log.wait(for: .removed(tmp("renamed-link"))))
        #expect(followed.watcher.snapshot().directories == 4)
        await followed.stop()
    }

    @Test func aQueueOverflowBecomesOneRescanOfTheFolder() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        mkdirs(tmp("d"))
        // Counted on the watcher's own thread, into the factory of the task that started it.
        let metrics = TestMetrics()
        let run = try await withMetricsFactory(metrics) { try await start(testOptions([tmp.path])) }
        // Stop reading and exceed the kernel queue (fs.inotify.max_queued_events) with
        // CLOSE_WRITEs alternating between two files (the kernel merges an event identical
        // to the one before it). Lowering the sysctl instead would touch every other
        // inotify user on the machine.
        writeFile(tmp("d/a.txt"))
        writeFile(tmp("d/b.txt"))
        run.watcher.setReadingPaused(true)
        let queued = InotifyLimit.queuedEvents.current ?? 16384
        for i in 0..<(queued + 100) {
            let fd = open(tmp(i % 2 == 0 ? "d/a.txt" : "d/b.txt"), O_WRONLY | O_CLOEXEC)
            close(fd)
        }
        // A directory created while events are being lost must still get its watch.
        mkdirs(tmp("unseen"))
        run.watcher.setReadingPaused(false)
        #expect(await run.log.wait(for: .scanNeeded(tmp.path, .overflow), timeout: .seconds(10)))
        #expect(run.log.all.filter { $0 == .scanNeeded(tmp.path, .overflow) }.count == 1)
        #expect(try metrics.expectCounter(DaemonCounter.inotifyOverflows.name).totalValue == 1)
        #expect(await run.log.wait { _ in run.watcher.snapshot().directories == 3 })
        writeFile(tmp("unseen/after.jpg"))
        #expect(await run.log.wait(for: .fileWritten(tmp("unseen/after.jpg"))))
        await run.stop()
        #expect(run.logs.lines.withLock { $0.contains { $0.1.contains("fs.inotify.max_queued_events") } })
    }

    @Test func runningOutOfWatchesFallsBackToPeriodicScans() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        for dir in ["a", "b", "c/d", "e/f/g"] { mkdirs(tmp(dir)) }
        // Room for 3 of the 8 directories.
        let run = try await start(testOptions([tmp.path]), watchBudget: 3)
        #expect(run.log.contains(.scanNeeded(tmp.path, .initial)))
        #expect(await run.log.wait { $0.contains { if case .watchLimitReached = $0 { true } else { false } } })
        var status = run.watcher.snapshot()
        #expect(status.watchLimitReached && status.directories == 3 && status.unwatchedDirectories == 5)
        #expect(status.maxUserWatches != nil)
        // The unwatched part is scanned periodically, with backoff.
        #expect(await run.log.wait(timeout: .seconds(3)) { events in
            events.filter { if case .scanNeeded(_, .unwatched) = $0 { true } else { false } }.count >= 4
        })
        let warnings = run.logs.lines.withLock { $0.filter { $0.1.contains("inotify watch limit reached") } }
        #expect(warnings.count == 1, "the actionable message is logged once")
        #expect(warnings.first?.0 == .warning)
        #expect(warnings.first?.1.contains("fs.inotify.max_user_watches = ") == true)
        #expect(warnings.first?.1.contains("5 directories are scanned every 150ms instead of watched") == true)
        #expect(warnings.first?.1.contains("sysctl -w fs.inotify.max_user_watches=") == true)
        // Room again: the next retry watches everything and the periodic scans stop.
        run.watcher.setWatchBudget(nil)
        #expect(await run.log.wait(timeout: .seconds(5)) { _ in
            let s = run.watcher.snapshot()
            return s.directories == 8 && !s.watchLimitReached && s.unwatchedDirectories == 0
        })
        writeFile(tmp("e/f/g/now-watched.jpg"))
        #expect(await run.log.wait(for: .fileWritten(tmp("e/f/g/now-watched.jpg"))))
        status = run.watcher.snapshot()
        #expect(status.unwatchedDirectories == 0)
        await run.stop()
    }

    @Test func aNewDirectoryBeyondTheLimitIsStillScanned() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        let run = try await start(testOptions([tmp.path]), watchBudget: 1)
        mkdirs(tmp("new/inner"))
        writeFile(tmp("new/inner/x.jpg"))
        #expect(await run.log.wait(for: .scanNeeded(tmp("new"), .newDirectory)))
        #expect(await run.log.wait { _ in run.watcher.snapshot().unwatchedDirectories == 2 })
        #expect(await run.log.wait(for: .scanNeeded(tmp("new"), .unwatched), timeout: .seconds(3)))
        await run.stop()
    }

    @Test func namesThatAreNotUTF8AreSkippedWithAReason() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        let run = try await start(testOptions([tmp.path]))
        var badFile = Array((tmp.path + "/bad").utf8CString.dropLast())
        badFile += [CChar(bitPattern: 0xFF), 0x2E, 0x6A, 0x70, 0x67, 0]
        let fd = badFile.withUnsafeBufferPointer { open($0.baseAddress!, O_WRONLY | O_CREAT, 0o644) }
        close(fd)
        var badDir = Array((tmp.path + "/dir").utf8CString.dropLast())
        badDir += [CChar(bitPattern: 0xFE), 0]
        _ = badDir.withUnsafeBufferPointer { mkdir($0.baseAddress!, 0o755) }
        writeFile(tmp("good.jpg"))
        #expect(await run.log.wait(for: .fileWritten(tmp("good.jpg"))))
        // Each new bad name asks for a listing of its directory, whose scan reports it in status.
        #expect(run.log.all == [.scanNeeded(tmp.path, .initial), .scanNeeded(tmp.path, .invalidName),
                                .scanNeeded(tmp.path, .invalidName), .fileWritten(tmp("good.jpg"))])
        #expect(run.watcher.snapshot().directories == 1)
        let lines = run.logs.lines.withLock { $0.filter { $0.1.contains("not valid UTF-8") } }
        #expect(lines.count == 2)
        #expect(lines.contains { $0.1.contains(tmp("bad\u{FFFD}.jpg")) })
        await run.stop()
    }

    @Test func aDirectoryRenamedFromAnExcludedNameIsNew() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        mkdirs(tmp(".incoming/sub"))
        writeFile(tmp(".incoming/sub/a.jpg"))
        let run = try await start(testOptions([tmp.path]))
        #expect(run.watcher.snapshot().directories == 1)
        rename(tmp(".incoming"), tmp("album"))
        #expect(await run.log.wait(for: .scanNeeded(tmp("album"), .newDirectory)))
        #expect(run.watcher.snapshot().directories == 3)
        #expect(!run.log.all.contains { if case .directoryMoved = $0 { true } else { false } })
        // And a file moved between directories keeps its identity.
        mkdirs(tmp("other"))
        #expect(await run.log.wait(for: .scanNeeded(tmp("other"), .newDirectory)))
        rename(tmp("album/sub/a.jpg"), tmp("other/a.jpg"))
        #expect(await run.log.wait(for: .fileMoved(from: tmp("album/sub/a.jpg"), to: tmp("other/a.jpg"))))
        await run.stop()
    }

    @Test func stopIsPromptIdempotentAndEndsTheStream() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        let run = try await start(testOptions([tmp.path]))
        let before = ContinuousClock.now
        run.watcher.stop()
        run.watcher.stop()
        #expect(ContinuousClock.now - before < .seconds(1))
        await run.log.finished()
        try run.watcher.start() // a stopped watcher stays stopped
        #expect(run.watcher.snapshot().folders == 1)
    }

    @Test func nestedFoldersAreWatchedOnce() async throws {
        let tmp = TempDir("watch")
        defer { tmp.remove() }
        mkdirs(tmp("inner"))
        let run = try await start(testOptions([tmp("inner"), tmp.path]), waitForInitial: false)
        #expect(await run.log.wait(for: .scanNeeded(tmp.path, .initial)))
        #expect(run.watcher.snapshot().folders == 1)
        #expect(run.watcher.snapshot().directories == 2)
        await run.stop()
    }
}
