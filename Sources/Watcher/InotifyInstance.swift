#if canImport(Glibc)
import Glibc
#endif
import Logging
import PhotolalaCore

/// The kernel's side of the watcher: the inotify descriptor, the mask each directory is
/// watched with, and one read buffer that events are read into. Owned by the watcher
/// thread alone.
final class InotifyInstance {
    private(set) var fd: Int32 = -1
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 8)
    private var openFailureLogged = false

    deinit {
        buffer.deallocate()
        close()
    }

    var isOpen: Bool { fd >= 0 }

    /// Opens the descriptor; when the instance limit says no, the log says so once, and
    /// that every folder is scanned every `rescan` instead.
    func open(logger: Logger, rescan: Duration) {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd < 0 else { return }
        let err = errno
        guard !openFailureLogged else { return }
        openFailureLogged = true
        logger.warning("\(InotifyLimit.noInstance(err, rescan: rescan))")
    }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    enum AddResult {
        case watched(Int32)
        /// The watch limit (or no instance at all).
        case limit
        case failed(Int32)
    }

    /// Watches the directory at `path`. `dontFollow`: a link there is not followed (a
    /// configured folder is followed like `find -H`; links inside only when asked).
    func addWatch(_ path: String, dontFollow: Bool) -> AddResult {
        guard fd >= 0 else { return .limit }
        // IN_ATTRIB: a subdirectory that could not be watched (no permission) is tried again
        // when its mode changes, so a folder made readable is watched without a rescan.
        var mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_ATTRIB)
        mask |= UInt32(IN_DELETE_SELF | IN_MOVE_SELF) | UInt32(IN_ONLYDIR) | UInt32(IN_EXCL_UNLINK)
        if dontFollow { mask |= UInt32(IN_DONT_FOLLOW) }
        let wd = inotify_add_watch(fd, path, mask)
        guard wd >= 0 else {
            let err = errno
            return err == ENOSPC || err == ENOMEM ? .limit : .failed(err)
        }
        return .watched(wd)
    }

    func removeWatch(_ wd: Int32) {
        if fd >= 0 { _ = inotify_rm_watch(fd, wd) }
    }

    /// One read of queued events; nil when none is waiting (or the read failed, which is logged).
    func read(logger: Logger) -> InotifyRecords? {
        guard fd >= 0, let base = buffer.baseAddress else { return nil }
        let n = retryingInterrupts { Glibc.read(fd, base, buffer.count) }
        if n < 0 {
            let err = errno
            if err != EAGAIN { logger.error("watcher: reading inotify failed: \(errnoText(err))") }
            return nil
        }
        return n == 0 ? nil : InotifyRecords(base: base, count: n)
    }
}
