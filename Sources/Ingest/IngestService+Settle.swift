#if canImport(Glibc)
import Glibc
#endif
import Digests
import Foundation
import PhotolalaCore
import Queue
import Watcher

/// Files and folders whose settle time ran out: recorded as they are now, then hashed.
extension IngestService {
    func settleLoop() async {
        while !Task.isCancelled {
            let since = await settleSignal.current
            let ready = aggregator.due(now: .now)
            for item in ready {
                switch item {
                case .file(let path): observe(path)
                case .scanDirectory(let dir, let recursive): requestScan(dir, recursive: recursive)
                }
            }
            if !ready.isEmpty { changed() }
            let deadline = aggregator.nextDeadline
            await settleSignal.wait(since: since, until: deadline)
        }
    }

    /// A settled file: record what it is now, and hash it if it is new or changed.
    private func observe(_ path: String) {
        var st = stat()
        let rc = options.watcher.followSymlinks ? stat(path, &st) : lstat(path, &st)
        if rc != 0 {
            if errno == ENOENT || errno == ENOTDIR { try? database.markGone(path: path) }
            return
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else { return }
        // Handed on by a scan, a roll-up or maxHold rather than by its CLOSE_WRITE, a file
        // may still be open and growing (IN_MODIFY is not watched): its mtime says when it
        // was last written. Not left alone for `settle` yet: wait until it has been.
        let rule = options.settleRule
        if let wait = rule.timeLeft(mtimeSec: Int64(st.st_mtim.tv_sec), mtimeNsec: Int64(st.st_mtim.tv_nsec), now: Date()) {
            aggregator.markUnsettled(path, now: rule.lastWrite(now: ContinuousClock.now, timeLeft: wait))
            return
        }
        scans.noteChange(PathNames.parent(of: path))
        do {
            for p in try database.observe([ObservedFile(path: path, identity: FileIdentity(st))]) { enqueueHash(p) }
        } catch {
            logger.error("cannot record a file in the queue: \(error)", metadata: ["path": "\(path)"])
            writeFailed()
        }
    }

    /// A file found waiting for its hash by a scan or in the backlog: hashed now, or, if
    /// it was written moments ago and may still be growing, once it has settled (true:
    /// the settle loop has a new deadline to wake for).
    @discardableResult
    func admit(_ path: String, mtimeSec: Int64, mtimeNsec: Int64, now: Date) -> Bool {
        let rule = options.settleRule
        guard let wait = rule.timeLeft(mtimeSec: mtimeSec, mtimeNsec: mtimeNsec, now: now) else {
            enqueueHash(path)
            return false
        }
        // Settles from its last write (observe() checks again then).
        aggregator.fileWritten(path, now: rule.lastWrite(now: ContinuousClock.now, timeLeft: wait))
        return true
    }
}
