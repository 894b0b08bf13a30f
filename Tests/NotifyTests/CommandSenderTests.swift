import Foundation
import PhotolalaCore
import Testing
import Notify

/// `notify.command` with real processes: the event in the environment and nothing else,
/// the exit status and the first line kept, and a time limit that stops the whole group.
@Suite struct CommandSenderTests {
    let event = NotifyEvent(event: .problem, reason: "quotaExceeded", severity: .critical, title: "Photolala backup paused on nas",
                            message: "The Photolala storage is full: uploads are paused.", device: "nas",
                            at: Date(timeIntervalSince1970: 1_800_000_000), status: .init(state: "paused", pending: 3, uploaded: 9))

    func script(_ body: String) throws -> (path: String, dir: URL) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("notify-cmd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("hook").path
        try ("#!/bin/sh\n" + body).write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        return (path, dir)
    }

    @Test func theEventIsInTheEnvironmentAndTheFirstLineIsKept() async throws {
        let (path, dir) = try script("env > \"$(dirname \"$0\")/env.txt\"\necho\necho \"sent to $PHOTOLALA_REASON\"\necho more\n")
        defer { try? FileManager.default.removeItem(at: dir) }
        let attempt = await CommandSender(path: path).send(event)
        #expect(attempt == Attempt(ok: true, answer: "exit 0: sent to quotaExceeded"))
        let env = try String(contentsOf: dir.appendingPathComponent("env.txt"), encoding: .utf8)
        #expect(env.contains("PHOTOLALA_EVENT=problem\n") && env.contains("PHOTOLALA_SEVERITY=critical\n"))
        #expect(env.contains("PHOTOLALA_TITLE=Photolala backup paused on nas\n"))
        #expect(env.contains("PHOTOLALA_MESSAGE=The Photolala storage is full: uploads are paused.\n"))
        let names = Set(env.split(separator: "\n").compactMap { $0.split(separator: "=").first.map(String.init) })
        // sh adds PWD (and SHLVL); nothing else of the test runner's environment came through.
        #expect(names.subtracting(["PWD", "SHLVL", "_", "OLDPWD"]).isSubset(of: [
            "PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "PHOTOLALA_EVENT", "PHOTOLALA_TITLE", "PHOTOLALA_MESSAGE",
            "PHOTOLALA_SEVERITY", "PHOTOLALA_REASON", "PHOTOLALA_DEVICE", "PHOTOLALA_AT", "PHOTOLALA_JSON"]), "\(names)")
    }

    @Test func aFailingCommandSaysItsStatusAndWhy() async throws {
        let (path, dir) = try script("echo 'msmtp: cannot connect to smtp.example' >&2\nexit 3\n")
        defer { try? FileManager.default.removeItem(at: dir) }
        let attempt = await CommandSender(path: path).send(event)
        #expect(attempt == Attempt(ok: false, answer: "\(path) exited with 3: msmtp: cannot connect to smtp.example"))
    }

    @Test func aCommandThatHangsIsStoppedWithItsChildren() async throws {
        let (path, dir) = try script("sleep 120 &\necho $! > \"$(dirname \"$0\")/child.pid\"\nwait\n")
        defer { try? FileManager.default.removeItem(at: dir) }
        let started = ContinuousClock.now
        let attempt = await CommandSender(path: path, timeLimit: .seconds(1)).send(event)
        #expect(!attempt.ok && attempt.answer.contains("did not finish within 1s"))
        // Not a stopwatch: well under the child's 120 s (a loaded test run can stall a
        // while), so the command was stopped rather than waited for.
        #expect(ContinuousClock.now - started < .seconds(100))
        let child = try #require(Int32(try String(contentsOf: dir.appendingPathComponent("child.pid"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)))
        try await Task.sleep(for: .milliseconds(300))
        // Gone, or a zombie waiting for an init that does not reap (as in a container).
        let stat = (try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8)) ?? ""
        #expect(kill(child, 0) != 0 || stat.contains(") Z "), "the command's child was stopped with it: \(stat)")
    }

    @Test func aCommandThatCannotRunSaysSo() async {
        let attempt = await CommandSender(path: "/nonexistent/hook").send(event)
        #expect(!attempt.ok && attempt.answer.hasPrefix("cannot run /nonexistent/hook"))
    }

    @Test func aChattyCommandDoesNotBlock() async throws {
        let (path, dir) = try script("head -c 1000000 /dev/zero | tr '\\0' 'x'\necho\n")
        defer { try? FileManager.default.removeItem(at: dir) }
        // A program that blocked on a full pipe would run into the limit and fail. The limit
        // is far above the 0.1 s this takes alone: CI starts a thousand tests on 2 cores at
        // once, and 10 s was once not enough there.
        let attempt = await CommandSender(path: path, timeLimit: .seconds(90)).send(event)
        #expect(attempt.ok && attempt.answer.count < 220, "\(attempt.answer)")
    }
}
