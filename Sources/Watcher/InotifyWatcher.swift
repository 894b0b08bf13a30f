/// Watcher: Finds photos: inotify watches, the settle/roll-up aggregator, and the directory scanner.
#if canImport(Glibc)
import Glibc
#endif
import Logging
import PhotolalaCore
import Synchronization

/// What `photolalactl status` shows under `watch` (filled into `DaemonStatus.Watch`).
package struct WatcherStatus: Sendable, Equatable {
    package var folders = 0
    /// Directories with an inotify watch.
    package var directories = 0
    package var missingFolders: [String] = []
    package var watchLimitReached = false
    /// fs.inotify.max_user_watches, as read at start and when the limit was hit.
    package var maxUserWatches: Int?
    /// Directories scanned periodically because they could not be watched.
    package var unwatchedDirectories = 0

    package init() {}

    /// The watcher's fields of the status's `watch` (scans are the ingest stage's).
    package func fill(_ watch: inout DaemonStatus.Watch) {
        watch.folders = folders
        watch.directories = directories
        watch.missingFolders = missingFolders
        watch.watchLimitReached = watchLimitReached
        watch.maxUserWatches = maxUserWatches
        watch.unwatchedDirectories = unwatchedDirectories
    }
}

package enum WatcherError: Error, Sendable, CustomStringConvertible {
    /// The process is out of descriptors or threads.
    case cannotStart(String)

    package var description: String {
        switch self {
        case .cannotStart(let why): "cannot start the folder watcher: \(why)"
        }
    }
}

/// Recursive inotify over every configured folder, on one dedicated thread that blocks in
/// poll(2) on the inotify descriptor and a wake-up socket: idle, it uses no CPU; `stop()`
/// wakes it at once. Raw inotify rather than libinotifytools because that library keeps
/// global state, cannot be woken for shutdown, and stops its recursive watch at the first
/// error without saying which directories stayed unwatched (needed for the ENOSPC
/// fallback).
///
/// All tree state (the wd ↔ directory table) lives on that thread (`WatchTree`); other
/// threads see only the event stream and `snapshot()`.
package final class InotifyWatcher: Sendable {
    package let options: WatcherOptions
    private let logger: Logger
    private let stream: AsyncStream<WatchEvent>
    private let continuation: AsyncStream<WatchEvent>.Continuation
    let shared: WatcherShared

    package convenience init(options: WatcherOptions, logger: Logger) {
        self.init(options: options, logger: logger, watchBudget: nil)
    }

    /// `watchBudget` stands in for a low fs.inotify.max_user_watches in tests: the limit is
    /// per user and system-wide, so lowering the real one would break other processes.
    init(options: WatcherOptions, logger: Logger, watchBudget: Int?) {
        self.options = options
        self.logger = logger
        // Unbounded: the consumer only updates an in-memory aggregator, and dropping an
        // event would silently lose a file.
        (stream, continuation) = AsyncStream.makeStream(of: WatchEvent.self, bufferingPolicy: .unbounded)
        shared = WatcherShared(watchBudget: watchBudget, folders: options.folders.count)
    }

    deinit { stop() }

    /// The events, for one consumer. It finishes after `stop()`.
    package func events() -> AsyncStream<WatchEvent> { stream }

    /// Starts the thread, which adds the watches and then reports per folder either
    /// `.scanNeeded(root, .initial)` (watched: scan it now to catch up) or `.folderMissing`.
    /// Returns at once; calling it again does nothing.
    package func start() throws(WatcherError) {
        var fds: [Int32] = [-1, -1]
        let proceed = shared.state.withLock { state -> Bool in
            guard !state.started else { return false }
            state.started = true
            return true
        }
        guard proceed else { return }
        // The Glibc module exposes neither eventfd nor pipe2; socketpair sets CLOEXEC atomically.
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds) == 0 else {
            throw .cannotStart("socketpair: \(errnoText(errno))")
        }
        let (options, logger, continuation, shared) = (self.options, self.logger, self.continuation, self.shared)
        let counters = DaemonCounter.Scope()
        let wakeRead = fds[0]
        shared.state.withLock { $0.wakeWrite = fds[1] }
        do {
            let thread = try OSThread.spawn(name: "photolala-watch") {
                let tree = WatchTree(options: options, logger: logger, shared: shared) { continuation.yield($0) }
                tree.counters = counters
                Self.run(tree, shared: shared, wakeFd: wakeRead, logger: logger)
                close(wakeRead)
            }
            shared.state.withLock { $0.thread = thread }
        } catch {
            close(fds[0])
            close(fds[1])
            shared.state.withLock { $0.wakeWrite = -1 }
            throw error
        }
    }

    /// The watcher thread: blocks in poll(2) on the wake-up socket, the inotify descriptor
    /// (unless a test paused reading) and /proc/self/mountinfo (POLLPRI on any mount or
    /// unmount, so a folder on a volume mounted later is picked up at once instead of at
    /// the next retry), hands what is ready to the tree, then runs its timers.
    private static func run(_ tree: WatchTree, shared: WatcherShared, wakeFd: Int32, logger: Logger) {
        let mountsFd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)
        defer { if mountsFd >= 0 { close(mountsFd) } }
        tree.start()
        var fds = [pollfd](repeating: pollfd(), count: 3)
        while !shared.stopping {
            let paused = shared.state.withLock { state in
                state.readingPausedApplied = state.readingPaused
                return state.readingPaused
            }
            fds[0] = pollfd(fd: wakeFd, events: Int16(POLLIN), revents: 0)
            fds[1] = pollfd(fd: paused ? -1 : tree.inotifyFd, events: Int16(POLLIN), revents: 0)
            fds[2] = pollfd(fd: mountsFd, events: Int16(POLLPRI), revents: 0)
            let n = retryingInterrupts { poll(&fds, nfds_t(fds.count), pollTimeout(until: tree.nextDeadline)) }
            if n < 0 {
                let err = errno
                logger.error("watcher: poll failed: \(errnoText(err)); retrying in 1s")
                usleep(1_000_000)
                continue
            }
            if fds[0].revents != 0 {
                var bytes = [UInt8](repeating: 0, count: 64)
                while read(wakeFd, &bytes, bytes.count) > 0 {}
            }
            if shared.stopping { break }
            if shared.state.withLock({ state in defer { state.rewatchRequested = false }; return state.rewatchRequested }) {
                tree.rewatchAll()
            }
            if fds[1].revents != 0 { tree.readEvents() }
            if fds[2].revents != 0 { tree.mountsChanged() }
            tree.fireTimers()
            tree.publish()
        }
        tree.stop()
    }

    /// poll(2)'s timeout in milliseconds (rounded up) until `deadline`; -1: none.
    private static func pollTimeout(until deadline: ContinuousClock.Instant?) -> Int32 {
        guard let deadline else { return -1 }
        let remaining = deadline - .now
        if remaining <= .zero { return 0 }
        let (seconds, attoseconds) = remaining.components
        return Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
    }

    /// Wakes the thread, waits for it to finish (closing inotify drops every watch), and
    /// finishes the event stream. Safe to call more than once and from any thread but the
    /// watcher's own.
    package func stop() {
        let (thread, wakeWrite) = shared.state.withLock { state -> (pthread_t?, Int32) in
            state.stopping = true
            let taken = (state.thread, state.wakeWrite)
            state.thread = nil
            state.wakeWrite = -1
            return taken
        }
        if wakeWrite >= 0 {
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
        }
        if let thread { pthread_join(thread, nil) }
        if wakeWrite >= 0 { close(wakeWrite) }
        continuation.finish()
    }

    /// Lists the whole tree again on the watcher's thread and adds the watches that are
    /// missing (directories that could not be watched before). For full rescans.
    package func rewatch() {
        let wake = shared.state.withLock { state -> Int32 in
            state.rewatchRequested = true
            return state.wakeWrite
        }
        if wake >= 0 {
            var byte: UInt8 = 1
            _ = write(wake, &byte, 1)
        }
    }

    package func snapshot() -> WatcherStatus {
        shared.state.withLock { $0.status }
    }

    /// Tests: stop reading the inotify descriptor so the kernel queue fills and overflows.
    /// Returns once the thread has taken the change into account.
    package func setReadingPaused(_ paused: Bool) {
        let wake = shared.state.withLock { state -> Int32 in
            state.readingPaused = paused
            return state.wakeWrite
        }
        guard wake >= 0 else { return }
        var byte: UInt8 = 1
        _ = write(wake, &byte, 1)
        for _ in 0..<2000 where shared.state.withLock({ $0.readingPausedApplied != paused }) { usleep(1000) }
    }

    /// Tests: change the stand-in watch limit (nil: only the kernel's).
    package func setWatchBudget(_ budget: Int?) {
        shared.state.withLock { $0.watchBudget = budget }
    }
}

/// The little the watcher thread and its owner share.
final class WatcherShared: Sendable {
    struct State {
        var status = WatcherStatus()
        var started = false
        var stopping = false
        var readingPaused = false
        var readingPausedApplied = false
        var rewatchRequested = false
        var watchBudget: Int?
        var thread: pthread_t?
        var wakeWrite: Int32 = -1
    }

    let state: Mutex<State>

    init(watchBudget: Int?, folders: Int) {
        var initial = State()
        initial.watchBudget = watchBudget
        initial.status.folders = folders
        state = Mutex(initial)
    }

    var stopping: Bool { state.withLock { $0.stopping } }
}
