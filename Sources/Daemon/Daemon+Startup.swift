#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Control
import Foundation
import PhotolalaCore
import Queue

/// What runs once before the services: the process's protections, the state directory,
/// the queue database and the control socket.
extension Daemon {
    package enum StartupError: Error, CustomStringConvertible {
        case stateDirectory(String, String)
        package var description: String {
            switch self {
            case let .stateDirectory(path, why):
                "cannot use the state directory \(path): \(why) (set daemon.state_dir, or create it writable by the daemon's user)"
            }
        }
    }

    /// Secrets live in the state directory: nothing we create is readable by others, and a
    /// crash must not leave a core dump holding tokens.
    static func hardenProcess() {
        umask(0o077)
        _ = photolala_disable_core_dumps()
        photolala_tune_malloc()
    }

    /// Start-up code (argument parsing, TOML, migrations, TLS set-up) runs once: its pages
    /// leave the daemon's RSS once the services have started.
    static func releaseStartupMemory() {
        Task.detached(priority: .background) {
            try? await Task.sleep(for: .seconds(3))
            photolala_trim_malloc()
            photolala_release_code_pages()
        }
    }

    func openDatabase() throws -> QueueDatabase {
        let logger = self.logger
        let database = try QueueDatabase.open(path: settings.daemon.stateDir + "/queue.db") { aside, why in
            logger.error("the queue database was damaged (\(why)); moved it aside and started a new one — a full scan re-queues every file", metadata: ["moved_to": "\(aside)"])
        }
        database.onProblem { problem in
            if let problem { logger.error("\(problem)") } else { logger.notice("the queue database can be written again") }
        }
        return database
    }

    func startControlServer(_ handler: DaemonControl, audit: any AuditRecorder) async throws -> ControlServer {
        let (gid, groupNote) = Self.lookupGroup(settings.daemon.socketGroup)
        if let groupNote { logger.warning("\(groupNote)") }
        let policy = AccessPolicy(daemonUID: getuid(), readerGroup: gid, readerGroupName: settings.daemon.socketGroup)
        return try await ControlServer.start(path: settings.daemon.socket, group: settings.daemon.socketGroup, policy: policy,
                                             handler: handler, audit: audit, logger: logger)
    }

    static func prepareStateDirectory(_ path: String) throws {
        let fm = FileManager.default
        var isDir: ObjCBool = false
        if fm.fileExists(atPath: path, isDirectory: &isDir) {
            guard isDir.boolValue else { throw StartupError.stateDirectory(path, "it is not a directory") }
        } else {
            do {
                try fm.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw StartupError.stateDirectory(path, "\(error.localizedDescription)")
            }
        }
        guard chmod(path, 0o700) == 0 || access(path, W_OK) == 0 else {
            throw StartupError.stateDirectory(path, String(cString: strerror(errno)))
        }
        guard access(path, R_OK | W_OK | X_OK) == 0 else {
            throw StartupError.stateDirectory(path, "not writable by uid \(getuid())")
        }
    }

    /// The gid of `daemon.socket_group`, or nil with a note when it does not exist.
    static func lookupGroup(_ name: String) -> (UInt32?, String?) {
        var grp = group()
        var result: UnsafeMutablePointer<group>? = nil
        var buffer = [CChar](repeating: 0, count: 16384)
        if getgrnam_r(name, &grp, &buffer, buffer.count, &result) == 0, result != nil {
            return (grp.gr_gid, nil)
        }
        return (nil, "the group '\(name)' (daemon.socket_group) does not exist: the control socket is mode 0600, so only root and the daemon's user can use photolalactl (create the group: groupadd --system \(name))")
    }
}
