#if canImport(Glibc)
import Glibc
#endif
import CLinux
import PhotolalaCore

/// Threads of our own, off the cooperative pool: the watcher blocks in poll(2) and the
/// scanner in readdir(2)/stat(2), which must not starve async tasks.
enum OSThread {
    private final class Start {
        let name: String
        let niceness: Int32?
        let body: @Sendable () -> Void
        init(name: String, niceness: Int32?, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.niceness = niceness
            self.body = body
        }
    }

    /// A joinable thread.
    static func spawn(name: String, niceness: Int32? = nil, _ body: @escaping @Sendable () -> Void) throws(WatcherError) -> pthread_t {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Start(name: name, niceness: niceness, body: body)).toOpaque()
        let rc = pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            let start = Unmanaged<Start>.fromOpaque(context).takeRetainedValue()
            photolala_name_this_thread(start.name)
            if let niceness = start.niceness { _ = photolala_nice_this_thread(niceness) }
            start.body()
            return nil
        }, context)
        guard rc == 0 else {
            Unmanaged<Start>.fromOpaque(context).release()
            throw .cannotStart("pthread_create: \(errnoText(rc))")
        }
        return thread
    }

    static func detach(name: String, niceness: Int32? = nil, _ body: @escaping @Sendable () -> Void) throws(WatcherError) {
        let thread = try spawn(name: name, niceness: niceness, body)
        pthread_detach(thread)
    }
}
