#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PhotolalaCore
import Queue
import Watcher

/// Scans reconcile a folder with the queue: new and changed files are hashed, files the
/// queue knows but the scan did not find are gone.
extension IngestService {
    func requestScan(_ path: String, recursive: Bool) {
        guard scans.request(path, recursive: recursive) else { return }
        Task { await scanSignal.notify() }
    }

    func scanLoop() async {
        while !Task.isCancelled {
            let since = await scanSignal.current
            guard let next = scans.begin() else {
                await scanSignal.wait(since: since, until: nil as ContinuousClock.Instant?)
                continue
            }
            workSinceRelease = true
            changed()
            await scan(next.path, recursive: next.recursive)
            scans.finish()
            lastScanAt = Date()
            changed()
            noteMaybeIdle()
        }
    }

    private func scan(_ root: String, recursive: Bool) async {
        let started = ContinuousClock.now
        let scanner = DirectoryScanner(options: options.watcher, logger: logger)
        var summary: ScanSummary?
        // A folder the queue knows nothing of (a first scan) can have nothing gone.
        let knewFiles = (try? database.knowsFiles(under: root)) ?? true
        // A first scan lists and records the whole tree before anything is read: on a NAS's
        // two cores the hashers competing with the listing made it six times slower than
        // `find` (docs/benchmarks.md), and the status total is right sooner. Files stay in
        // the hash queue meanwhile; events are still recorded.
        if !knewFiles {
            hashHeld = true
            database.bulkWrites(true)
        }
        defer {
            if !knewFiles {
                database.bulkWrites(false)
                armBacklog()
            }
            if hashHeld {
                hashHeld = false
                Task { await hashSignal.notify() }
            }
        }
        let batches = scanner.batches(root, recursive: recursive)
        var iterator = batches.makeAsyncIterator()
        // The scanner lists the next batch while this one is recorded, so a listing may
        // have started as early as the previous request: changes since then make it suspect.
        var previousRequest = scans.epoch
        while true {
            // Listings are taken while this actor goes on handling events.
            let listedAfter = previousRequest
            previousRequest = scans.epoch
            guard let output = await iterator.next() else { break }
            switch output {
            case .directories(let listings):
                var fresh: [DirectoryListing] = []
                fresh.reserveCapacity(listings.count)
                for listing in listings {
                    if scans.changed(listing.path, since: listedAfter) {
                        // Events moved or recorded files here after it was listed: list it
                        // again once it is quiet instead of calling those files gone.
                        logger.debug("directory changed while scanned; listing it again", metadata: ["dir": "\(listing.path)"])
                        aggregator.directoryScanRequested(listing.path, recursive: false, now: .now)
                        continue
                    }
                    fresh.append(DirectoryListing(dir: listing.path, files: listing.files.map {
                        ObservedFile(path: $0.path, identity: FileIdentity(device: $0.device, inode: $0.inode, size: $0.size,
                                                                            mtimeSec: $0.mtimeSeconds, mtimeNsec: $0.mtimeNanoseconds))
                    }))
                }
                do {
                    // One batch, one read and at most one write transaction.
                    let need = try database.reconcileDirectories(fresh, firstScan: !knewFiles)
                    // A first scan's files wait in the database: the backlog reads them back.
                    guard knewFiles else { continue }
                    let now = Date()
                    for f in need { admit(f.path, mtimeSec: f.identity.mtimeSec, mtimeNsec: f.identity.mtimeNsec, now: now) }
                } catch {
                    logger.error("cannot record a scan in the queue: \(error)", metadata: ["dir": "\(fresh.first?.dir ?? root)"])
                    writeFailed()
                }
            case .finished(let s):
                summary = s
            }
        }
        await settleSignal.notify()
        guard var summary else { return }
        if !summary.rootListed, access(root, F_OK) != 0, errno == ENOENT {
            // Renamed or deleted before its scan ran (events said where it went): gone, not unreadable.
            summary.unreadable.removeAll { $0.path.utf8.elementsEqual(root.utf8) }
        }
        let fresh = folderProblems.scanned(root, recursive: recursive, invalidNameCount: summary.invalidNameCount,
                                           invalidNames: summary.invalidNames,
                                           unreadable: summary.unreadable.map { .init(path: $0.path, reason: $0.reason) })
        for problem in fresh {
            logger.warning("cannot read a folder: \(problem.path): \(problem.reason) — \(FolderProblems.advice(for: problem.reason))")
        }
        if recursive && summary.rootListed && knewFiles {
            sweep(root, summary: summary)
        }
        // From the first listing to the last write, sweep included: the whole scan.
        let elapsed = ContinuousClock.now - started
        logger.info("scanned \(root)", metadata: ["files": "\(summary.files)", "directories": "\(summary.directories)",
                                                  "ms": "\(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)"])
    }

    /// Directories the queue knows but the scan did not find are gone — except under a
    /// folder we could not read, where absence proves nothing.
    private func sweep(_ root: String, summary: ScanSummary) {
        let blind = summary.unreadable.map(\.path)
        // Directories that events filled during the scan (a folder renamed into one listed
        // earlier, files recorded in a directory made after its parent was listed) were not
        // visited but are not gone either.
        let changed = scans.changedDirectories(within: root)
        guard changed.count <= 256 else {
            logger.debug("the tree changed too much during the scan to tell what vanished; the next scan will", metadata: ["root": "\(root)"])
            return
        }
        do {
            let swept = try database.sweepDirectories(under: root, visited: summary.visitedDirectories, excluding: blind + changed)
            if swept > 0 { logger.info("\(swept) files are gone from \(root)") }
        } catch {
            logger.error("cannot record vanished files: \(error)")
            writeFailed()
        }
    }

    func rescanTimer() async {
        while !Task.isCancelled {
            guard let interval = options.rescanInterval else {
                try? await Task.sleep(for: .seconds(3600))
                continue
            }
            // ±10% so many NASes (and many folders) do not rescan in lockstep.
            let jitter = Double.random(in: 0.9...1.1)
            try? await Task.sleep(for: .milliseconds(Int64(Units.seconds(interval) * 1000 * jitter)))
            if Task.isCancelled { return }
            rescanAll(reason: "periodic safety net")
        }
    }
}
