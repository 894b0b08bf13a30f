#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PhotolalaCore
import Queue
import Watcher

/// What the watcher reports, turned into queue changes and settle timers.
extension IngestService {
    func startWatcher() {
        let w = InotifyWatcher(options: options.watcher, logger: logger)
        do {
            try w.start()
        } catch {
            logger.error("cannot watch the folders: \(error); falling back to periodic scans")
            rescanAll(reason: "no inotify")
            return
        }
        watcher = w
        let events = w.events()
        pipelineTasks.append(Task {
            for await event in events { await self.handle(event) }
        })
    }

    func handle(_ event: WatchEvent) async {
        let now = ContinuousClock.now
        do {
            switch event {
            case .fileWritten(let path):
                aggregator.fileWritten(path, now: now)
            case .fileMoved(let from, let to):
                scans.noteChange(PathNames.parent(of: from))
                scans.noteChange(PathNames.parent(of: to))
                aggregator.moved(from: from, to: to)
                if try !database.renameFile(from: from, to: to) {
                    aggregator.fileWritten(to, now: now)
                } else {
                    rehashMoved(from: from, to: to, now: now)
                }
            case .removed(let path):
                aggregator.removed(path)
                hashes.drop(within: path)
                try database.markGone(path: path)
            case .directoryMoved(let from, let to):
                scans.noteChange(from)
                scans.noteChange(to)
                aggregator.moved(from: from, to: to)
                if let again = scans.follow(from: from, to: to) { requestScan(again.path, recursive: again.recursive) }
                try database.renameDirectory(from: from, to: to)
                rehashMoved(from: from, to: to, now: now)
                logger.debug("directory renamed", metadata: ["from": "\(from)", "to": "\(to)"])
            case .scanNeeded(let path, let reason):
                switch reason {
                case .initial, .folderAvailable, .newDirectory, .unwatched:
                    requestScan(path, recursive: true)
                case .overflow:
                    logger.warning("the kernel's event queue overflowed: rescanning \(path)")
                    requestScan(path, recursive: true)
                case .invalidName:
                    requestScan(path, recursive: false)
                }
            case .folderMissing(let root):
                logger.warning("watched folder missing or unreadable (retrying): \(root)")
                aggregator.removed(root)
                hashes.drop(within: root)
            case .folderAvailable(let root):
                logger.notice("watched folder available again: \(root)")
            case .watchLimitReached:
                break
            }
        } catch {
            logger.error("cannot record a change in the queue: \(error)", metadata: ["event": "\(event)"])
            writeFailed()
        }
        await settleSignal.notify()
        changed()
    }

    /// Files renamed (or inside a renamed directory) while waiting to be hashed or being
    /// hashed settle again under their new name (see `HashQueue.moved`).
    private func rehashMoved(from: String, to: String, now: ContinuousClock.Instant) {
        for path in hashes.moved(from: from, to: to) { aggregator.fileWritten(path, now: now) }
    }
}
