import Foundation
import Digests
import PhotolalaCore
import Queue

/// The hasher pool's side: files in, digests recorded in the queue in batches.
extension IngestService {
    /// As many files per hasher thread as it hashes at once, and a few more.
    static let filesInFlightPerWorker = 4

    /// Points the backlog at the first file waiting for a hash (see `HashQueue.armBacklog`).
    func armBacklog() {
        do {
            guard let start = try database.unhashedStart() else { return }
            hashes.armBacklog(at: start)
            Task { await hashSignal.notify() }
        } catch {
            logger.error("cannot read the files waiting for a hash: \(error); the next scan finds them")
        }
    }

    /// Files put back to be hashed outside a scan (the uploader found a source changed,
    /// `retry` of unreadable files) wait in the queue: the backlog reads them from there.
    func needsHashLoop() async {
        let signal = database.signals.needsHash
        var since = await signal.current
        while !Task.isCancelled {
            await signal.wait(since: since, until: nil as ContinuousClock.Instant?)
            since = await signal.current
            if Task.isCancelled { return }
            armBacklog()
        }
    }

    /// Moves the next chunk of the backlog into the hash queue; false when nothing is left
    /// to take (or the database cannot be read: the next rescan finds those files
    /// waiting, and the next start or first scan arms the backlog again).
    private func refillFromBacklog() -> Bool {
        guard let after = hashes.backlogCursor else { return false }
        let files: [UnhashedFile]
        do {
            files = try database.unhashedFiles(after: after, limit: HashQueue.backlogChunk)
        } catch {
            logger.error("cannot read the files waiting for a hash: \(error); the next scan finds them")
            hashes.backlogRead(lastId: nil)
            return false
        }
        hashes.backlogRead(lastId: files.last?.id)
        guard !files.isEmpty else { return false }
        let now = Date()
        var settling = false
        // Files already queued, in flight or being recorded are skipped by enqueueHash.
        for f in files where admit(f.path, mtimeSec: f.mtimeSec, mtimeNsec: f.mtimeNsec, now: now) { settling = true }
        if settling { Task { await settleSignal.notify() } }
        return true
    }

    func enqueueHash(_ path: String) {
        guard hashes.enqueue(path) else { return }
        workSinceRelease = true
        // One wake-up for a scan batch's thousand files, not a task each.
        if !hashWakePending {
            hashWakePending = true
            Task { await self.wakeHashLoops() }
        }
    }

    private func wakeHashLoops() async {
        // Cleared before notifying: a file queued after this gets a wake-up of its own.
        hashWakePending = false
        await hashSignal.notify()
    }

    private func nextToHash() -> String? {
        repeat {
            if let path = hashes.next() { return path }
        } while refillFromBacklog()
        return nil
    }

    func hashLoop(_ worker: Int) async {
        while !Task.isCancelled {
            let since = await hashSignal.current
            guard !hashHeld, let path = nextToHash() else {
                await hashSignal.wait(since: since, until: nil as ContinuousClock.Instant?)
                continue
            }
            hashing += 1
            let result = await pool.hash(path: path, followSymlinks: options.watcher.followSymlinks, sha256: payloadDigests.wanted)
            hashing -= 1
            hashes.hashed(path)
            hashed.append((path, result))
            if !recordScheduled {
                recordScheduled = true
                // During a scan its own transactions come first: results are written a
                // tenth of a second's worth at a time rather than two or three per commit.
                let gather = scans.isScanning
                Task {
                    if gather { try? await Task.sleep(for: .milliseconds(100)) }
                    await self.recordHashed()
                }
            }
        }
    }

    private func recordHashed() async {
        recordScheduled = false
        let results = hashed
        hashed.removeAll(keepingCapacity: true)
        var digests: [HashedFile] = []
        var elapsed: [Duration] = []
        func flush() {
            guard !digests.isEmpty else { return }
            do {
                for (i, outcome) in try database.recordHashes(digests).enumerated() {
                    let file = digests[i]
                    switch outcome {
                    case .recorded(let state):
                        // Same bytes as an object already in S3: backed up without an upload.
                        if state == .uploaded { DaemonCounter.uploadedFiles.increment() }
                        // µs from open to the last stat: the benchmark's figure for the hasher.
                        let (seconds, attoseconds) = elapsed[i].components
                        logger.debug("hashed", metadata: ["path": "\(file.path)", "md5": "\(file.md5)", "state": "\(state.publicName)",
                                                          "us": "\(seconds * 1_000_000 + attoseconds / 1_000_000_000_000)"])
                    case .stale:
                        aggregator.markUnsettled(file.path, now: .now)
                    case .unknown:
                        break
                    }
                }
            } catch {
                logger.error("cannot record hashes in the queue: \(error)", metadata: ["files": "\(digests.count)", "first": "\(digests[0].path)"])
                writeFailed()
            }
            digests.removeAll()
            elapsed.removeAll()
        }
        // In arrival order: a failure for a path is applied after its earlier successes.
        for (path, result) in results {
            switch result {
            case .success(let digest):
                hashMeter.add(digest.identity.size)
                DaemonCounter.hashedFiles.increment()
                DaemonCounter.hashedBytes.increment(by: digest.identity.size)
                elapsed.append(digest.elapsed)
                digests.append(HashedFile(path: path, identity: digest.identity, md5: digest.md5))
                if let sha256 = digest.sha256 { payloadDigests.store(md5: digest.md5, identity: digest.identity, sha256: sha256) }
            case .failure(let failure):
                flush()
                record(path, failure)
            }
        }
        flush()
        hashes.recorded(results.map(\.0))
        await settleSignal.notify()
        changed()
        noteMaybeIdle()
    }

    private func record(_ path: String, _ failure: FileHasher.Failure) {
        do {
            switch failure {
            case .changed:
                logger.debug("changed while being read; it settles again", metadata: ["path": "\(path)"])
                aggregator.markUnsettled(path, now: .now)
            case .vanished, .notRegularFile:
                try database.markGone(path: path)
            case .unreadable(let why):
                logger.warning("cannot read a file: \(why)", metadata: ["path": "\(path)"])
                try database.recordUnreadable(path: path, reason: why)
            }
        } catch {
            logger.error("cannot record a hash in the queue: \(error)", metadata: ["path": "\(path)"])
            writeFailed()
        }
    }
}
