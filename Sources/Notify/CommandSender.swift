import Foundation
import PhotolalaCore
import Subprocess
import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// `notify.command`: runs the program once per event with the event in its environment
/// (`PHOTOLALA_EVENT`, `_TITLE`, `_MESSAGE`, `_SEVERITY`, `_REASON`, `_DEVICE`, `_AT`,
/// `_JSON`) and nothing else of the daemon's: no inherited variable can carry a secret
/// into it. It runs in its own process group with no input, in `/`, for at most
/// `timeLimit`, then the group gets SIGTERM and, 5 s later, SIGKILL; its exit status and
/// the first line of its output are kept.
package struct CommandSender: Sendable {
    let path: String
    var timeLimit: Duration = .seconds(30)

    package init(path: String, timeLimit: Duration = .seconds(30)) {
        self.path = path
        self.timeLimit = timeLimit
    }

    /// The variables of the daemon's own environment the command may see: where programs
    /// are, the language, and who it runs as (systemd sets these for `User=`).
    static let passedThrough = ["HOME", "USER", "LOGNAME", "LANG", "TZ"]

    package static func environment(_ event: NotifyEvent, inherited: [String: String] = ProcessInfo.processInfo.environment) -> [String: String] {
        var env: [String: String] = ["PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
        for key in passedThrough { if let v = inherited[key] { env[key] = v } }
        if env["LANG"] == nil { env["LANG"] = "C.UTF-8" }
        env["PHOTOLALA_EVENT"] = event.event.rawValue
        env["PHOTOLALA_TITLE"] = event.title
        env["PHOTOLALA_MESSAGE"] = event.message
        env["PHOTOLALA_SEVERITY"] = event.severity.rawValue
        env["PHOTOLALA_REASON"] = event.reason ?? ""
        env["PHOTOLALA_DEVICE"] = event.device
        env["PHOTOLALA_AT"] = event.at
        env["PHOTOLALA_JSON"] = String(decoding: WebhookMessage.json(event), as: UTF8.self)
        return env
    }

    /// Its own process group, so a shell script's children are stopped with it.
    static func platformOptions() -> PlatformOptions {
        var options = PlatformOptions()
        options.processGroupID = 0
        options.teardownSequence = [.gracefulShutDown(toProcessGroup: true, allowedDurationToNextStep: .seconds(5))]
        return options
    }

    package func send(_ event: NotifyEvent) async -> Attempt {
        let options = Self.platformOptions()
        let environment = Environment.custom(Dictionary(uniqueKeysWithValues: Self.environment(event).map { (Environment.Key(stringLiteral: $0.key), $0.value) }))
        let executable = Executable.path(FilePath(path))
        let limit = timeLimit
        let started = StartedGroup()
        do {
            let outcome = try await withThrowingTaskGroup(of: (TerminationStatus, [UInt8])?.self) { group in
                group.addTask {
                    let result = try await run(executable, arguments: [], environment: environment, workingDirectory: FilePath("/"),
                                               platformOptions: options, input: .none, output: .sequence, error: .combinedWithOutput) { execution in
                        started.group.withLock { $0 = execution.processIdentifier.value }
                        // The head of the output is kept; the rest is read and let go, so a chatty
                        // program never blocks on a full pipe.
                        var head: [UInt8] = []
                        for try await buffer in execution.standardOutput where head.count < 4096 {
                            buffer.withUnsafeBytes { head.append(contentsOf: $0.prefix(4096 - head.count)) }
                        }
                        return head
                    }
                    return (result.terminationStatus, result.closureResult)
                }
                group.addTask {
                    try await Task.sleep(for: limit)
                    // Stopped here rather than left to the task's cancellation: a child still
                    // holding the output pipe would otherwise keep the read (and us) waiting.
                    await started.stop()
                    return nil
                }
                let first = try await group.next() ?? nil
                group.cancelAll()
                return first
            }
            guard let (status, output) = outcome, !started.timedOut else {
                return Attempt(ok: false, answer: "\(path) did not finish within \(Units.format(limit)): stopped")
            }
            let line = Self.firstLine(output)
            switch status {
            case .exited(0):
                return Attempt(ok: true, answer: "exit 0" + (line.isEmpty ? "" : ": \(line)"))
            case .exited(let code):
                return Attempt(ok: false, answer: "\(path) exited with \(code)" + (line.isEmpty ? "" : ": \(line)"))
            case .signaled(let signal):
                return Attempt(ok: false, answer: "\(path) was killed by signal \(signal)" + (line.isEmpty ? "" : ": \(line)"))
            }
        } catch is CancellationError {
            return Attempt(ok: false, answer: "\(path): stopped (the daemon is stopping)")
        } catch {
            return Attempt(ok: false, answer: "cannot run \(path): \(error)")
        }
    }

    /// The command's process group, once it runs (its pid: it leads its own group).
    final class StartedGroup: Sendable {
        let group = Mutex<pid_t?>(nil)
        private let stopped = Mutex(false)

        var timedOut: Bool { stopped.withLock { $0 } }

        /// SIGTERM to the group, SIGKILL 5 s later if any of it is left.
        func stop() async {
            stopped.withLock { $0 = true }
            guard signal(SIGTERM) else { return }
            for _ in 0..<50 {
                guard signal(0) else { return }
                try? await Task.sleep(for: .milliseconds(100))
            }
            _ = signal(SIGKILL)
        }

        /// Whether the group was there to get it.
        @discardableResult
        private func signal(_ sig: Int32) -> Bool {
            group.withLock { pid in
                guard let pid, pid > 0 else { return false }
                return kill(-pid, sig) == 0
            }
        }
    }

    static func firstLine(_ bytes: [UInt8]) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        let line = text.split(whereSeparator: \.isNewline).first { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        return String((line.map(String.init) ?? "").trimmingCharacters(in: .whitespaces).prefix(200))
    }
}
