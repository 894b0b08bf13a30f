#if canImport(Glibc)
import Glibc
#endif
import Logging
import PhotolalaCore
import Synchronization
import Testing
import Watcher

/// A fresh directory, removed (with everything in it) by `remove()`. On tmpfs when there
/// is one: creating files on this machine's ext4 costs about a millisecond each, and
/// inotify behaves the same on both.
final class TempDir: Sendable {
    let path: String
    static let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"

    init(_ label: String = "w") {
        var template = Array("\(TempDir.base)/photolala-\(label)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed: \(errno)")
        path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func callAsFunction(_ relative: String) -> String { path + "/" + relative }

    func remove() { removeTree(path) }
}

/// rm -rf without Foundation, by bytes, so names that are not UTF-8 go too.
func removeTree(_ path: String) { removeTree(cPath: Array(path.utf8CString)) }

private func removeTree(cPath: [CChar]) {
    cPath.withUnsafeBufferPointer { buffer in
        let p = buffer.baseAddress!
        var st = stat()
        guard lstat(p, &st) == 0 else { return }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            unlink(p)
            return
        }
        _ = chmod(p, 0o755)
        var children: [[CChar]] = []
        if let dir = opendir(p) {
            _ = DirectoryEntries.forEach(dir) { cName, _ in
                var child = Array(cPath.dropLast())
                child.append(0x2F)
                child.append(contentsOf: UnsafeBufferPointer(start: cName, count: strlen(cName) + 1))
                children.append(child)
            }
            closedir(dir)
        }
        for child in children { removeTree(cPath: child) }
        rmdir(p)
    }
}

func mkdirs(_ path: String) {
    var current = ""
    for part in path.split(separator: "/") {
        current += "/" + part
        mkdir(current, 0o755)
    }
}

@discardableResult
func writeFile(_ path: String, _ text: String = "photo bytes") -> Bool {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return text.withCString { write(fd, $0, strlen($0)) } >= 0
}

func statOf(_ path: String) -> stat {
    var st = stat()
    _ = stat(path, &st)
    return st
}

/// Collects a watcher's events in the background; tests wait for what they expect.
final class EventLog: Sendable {
    private final class Box: Sendable { let events = Mutex<[WatchEvent]>([]) }
    private let box = Box()
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<WatchEvent>) {
        let box = box
        task = Task { for await event in stream { box.events.withLock { $0.append(event) } } }
    }

    var all: [WatchEvent] { box.events.withLock { $0 } }

    func contains(_ event: WatchEvent) -> Bool { all.contains(event) }

    /// Polls (tests only) until `predicate` holds or `timeout` passes.
    @discardableResult
    func wait(timeout: Duration = .seconds(5), _ predicate: ([WatchEvent]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if predicate(all) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return predicate(all)
    }

    @discardableResult
    // Generous: the wait ends as soon as the event is seen; only a loaded CI machine gets near it.
    func wait(for event: WatchEvent, timeout: Duration = .seconds(20)) async -> Bool {
        await wait(timeout: timeout) { $0.contains(event) }
    }

    func clear() { box.events.withLock { $0.removeAll() } }

    func finished() async { await task.value }
}

/// A log handler that keeps what was logged, to check the actionable messages.
struct CapturingLogHandler: LogHandler {
    final class Store: Sendable { let lines = Mutex<[(Logger.Level, String)]>([]) }
    let store: Store
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        store.lines.withLock { $0.append((event.level, event.message.description)) }
    }
}

func capturingLogger() -> (Logger, CapturingLogHandler.Store) {
    let store = CapturingLogHandler.Store()
    return (Logger(label: "test") { _ in CapturingLogHandler(store: store) }, store)
}

/// Options with timings short enough for tests.
func testOptions(_ folders: [String], followSymlinks: Bool = false) -> WatcherOptions {
    WatcherOptions(folders: folders, followSymlinks: followSymlinks, settle: .milliseconds(50),
                   missingFolderRetry: Backoff(base: 0.05, cap: 0.2, jitter: .none),
                   unwatchedRescan: Backoff(base: 0.15, cap: 0.6, jitter: .none))
}

/// Files a recursive scan of each path finds (what the driver does with `.scanNeeded`).
func scannedPaths(_ dirs: [String], options: WatcherOptions) -> Set<String> {
    let scanner = DirectoryScanner(options: options)
    var found = Set<String>()
    for dir in dirs {
        _ = scanner.scan(dir) { batch in
            for listing in batch { for file in listing.files { found.insert(file.path) } }
        }
    }
    return found
}
