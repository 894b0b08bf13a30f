import Digests
import Logging
import PhotolalaCore
import Queue

/// Records a batch of hasher results in the queue, in arrival order (`HashResults`): runs
/// of digests one transaction each, failures one by one, counted and logged. What the
/// batch means for the ingest stage's own state comes back to it: the files to settle
/// again (changed while read, or changed again by the time they were recorded) and
/// whether a write failed (a rescan then puts back what it missed).
struct HashRecorder {
    let database: QueueDatabase
    let payloadDigests: PayloadDigests
    let meter: RateMeter
    let clock: any DaemonClock
    let logger: Logger

    struct Outcome {
        var unsettled: [String] = []
        var writeFailed = false
    }

    func record(_ results: [(String, HasherPool.Result)]) async -> Outcome {
        var batch = HashResults(results)
        var outcome = Outcome()
        // In arrival order: a failure for a path is applied after its earlier successes.
        while let step = batch.next() {
            switch step {
            case .digests(let files, let results):
                // Counted once a run: a counter looked up per file was 1 % of a first
                // start's CPU on 100,000 small files.
                DaemonCounter.hashedFiles.increment(by: Int64(files.count))
                DaemonCounter.hashedBytes.increment(by: files.reduce(0) { $0 + $1.identity.size })
                for (file, result) in zip(files, results) {
                    meter.add(file.identity.size)
                    if payloadDigests.wanted, let sha256 = result.sha256 {
                        payloadDigests.store(md5: file.md5, identity: file.identity, sha256: sha256)
                    }
                }
                await record(files, elapsed: results.map(\.elapsed), into: &outcome)
            case .failure(let path, let failure):
                await record(path, failure, into: &outcome)
            }
        }
        return outcome
    }

    private func record(_ digests: [HashedFile], elapsed: [Duration], into outcome: inout Outcome) async {
        do {
            for (i, result) in try await database.recordHashes(digests, now: clock.now()).enumerated() {
                let file = digests[i]
                switch result {
                case .recorded(let state):
                    // Same bytes as an object already in S3: backed up without an upload.
                    if state == .uploaded { DaemonCounter.uploadedFiles.increment() }
                    // µs from open to the last stat: the benchmark's figure for the hasher.
                    let (seconds, attoseconds) = elapsed[i].components
                    logger.debug("hashed", metadata: ["path": "\(file.path)", "md5": "\(file.md5)", "state": "\(state.publicName)",
                                                      "us": "\(seconds * 1_000_000 + attoseconds / 1_000_000_000_000)"])
                case .stale:
                    outcome.unsettled.append(file.path)
                case .unknown:
                    break
                }
            }
        } catch {
            logger.error("cannot record hashes in the queue: \(error)", metadata: ["files": "\(digests.count)", "first": "\(digests[0].path)"])
            outcome.writeFailed = true
        }
    }

    private func record(_ path: String, _ failure: FileHasher.Failure, into outcome: inout Outcome) async {
        do {
            switch failure {
            case .changed:
                logger.debug("changed while being read; it settles again", metadata: ["path": "\(path)"])
                outcome.unsettled.append(path)
            case .vanished, .notRegularFile:
                try await database.markGone(path: path, now: clock.now())
            case .unreadable(let why):
                logger.warning("cannot read a file: \(why)", metadata: ["path": "\(path)"])
                try await database.recordUnreadable(path: path, reason: why, now: clock.now())
            }
        } catch {
            logger.error("cannot record a hash in the queue: \(error)", metadata: ["path": "\(path)"])
            outcome.writeFailed = true
        }
    }
}
