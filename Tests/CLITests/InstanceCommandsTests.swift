import ArgumentParser
import Control
import Foundation
import PhotolalaCore
import Testing
@testable import CLI

/// `photolalactl --instance NAME`, `status --check` and `status --all` (cli.md, config.md
/// "Instances"): which daemon is asked, what needs the user, the exit codes.
@Suite struct InstanceCommandsTests {
    @Test func anInstanceHasItsOwnSocketAndGroup() throws {
        let alice = try CtlOptions.parse(["--instance", "alice"]).client(environment: [:])
        #expect(alice.socketPath == "/run/photolala/alice.sock" && alice.groupHint == "photolala-alice")
        let fromEnv = try CtlOptions.parse([]).client(environment: ["PHOTOLALA_INSTANCE": "bob"])
        #expect(fromEnv.socketPath == "/run/photolala/bob.sock")
        // The flag beats the environment; --socket and $PHOTOLALA_SOCKET beat both.
        #expect(try CtlOptions.parse(["--instance", "alice"]).client(environment: ["PHOTOLALA_INSTANCE": "bob"]).socketPath
                == "/run/photolala/alice.sock")
        #expect(try CtlOptions.parse(["--instance", "alice", "--socket", "/s"]).client(environment: [:]).socketPath == "/s")
        #expect(try CtlOptions.parse(["--instance", "alice"]).client(environment: ["PHOTOLALA_SOCKET": "/e"]).socketPath == "/e")
        #expect(try CtlOptions.parse([]).client(environment: [:]).socketPath == "/run/photolala/photolalad.sock")
    }

    @Test func theInstancesConfigNamesItsSocket() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("inst-\(UUID().uuidString).toml").path
        try "[daemon]\nsocket = \"/srv/a.sock\"\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let client = try CtlOptions.parse(["--instance", "alice", "--config", path]).client(environment: [:])
        #expect(client.socketPath == "/srv/a.sock" && client.groupHint == "photolala-alice")
    }

    @Test func aBadInstanceNameIsAUsageError() {
        #expect(throws: (any Error).self) { try Ctl.parseAsRoot(["status", "--instance", "Alice"]) }
        #expect(throws: (any Error).self) { try Ctl.parseAsRoot(["--instance", "../x", "status"]) }
        #expect(throws: (any Error).self) { try Ctl.parseAsRoot(["status", "--all", "--instance", "alice"]) }
        #expect(throws: (any Error).self) { try Ctl.parseAsRoot(["status", "--check", "--json"]) }
        #expect((try? Ctl.parseAsRoot(["status", "--all", "--check"])) is StatusCommand)
        #expect((try? Ctl.parseAsRoot(["--instance", "alice", "queue"])) is QueueCommand)
    }

    @Test func aDownInstanceIsNamedByItsUnit() {
        #expect(ControlClient.Failure.notRunning(path: "/run/photolala/alice.sock").description
                .hasSuffix("start it with: systemctl start photolalad@alice"))
        #expect(ControlClient.Failure.notRunning(path: "/run/photolala/photolalad.sock").description
                .hasSuffix("start it with: systemctl start photolalad"))
        #expect(ControlClient.Failure.notRunning(path: "/tmp/x.sock").description.hasSuffix("systemctl start photolalad"))
    }

    // MARK: what needs the user

    func signedIn() -> DaemonStatus {
        var s = DaemonStatus(state: .running)
        s.account = .init(signedIn: true, userId: "550E8400-E29B-41D4-A716-446655440000")
        s.queue.uploaded = 3
        return s
    }

    @Test func nothingNeedsTheUserOfAHealthyDaemon() {
        #expect(signedIn().userNeeds.isEmpty)
        var paused = signedIn()
        paused.state = .paused
        paused.pauseReason = .user
        #expect(paused.userNeeds.isEmpty, "the user's own pause needs nobody")
        var uploading = signedIn()
        uploading.queue.pending = 100
        #expect(uploading.userNeeds.isEmpty)
    }

    @Test func whatTheStatusAsksForNeedsTheUser() {
        var fresh = DaemonStatus(state: .needsLogin)
        #expect(fresh.userNeeds == ["Not signed in yet: run `photolalactl login`."])
        fresh.instance = "alice"
        #expect(fresh.userNeeds == ["Not signed in yet: run `photolalactl --instance alice login`."])
        var revoked = signedIn()
        revoked.attention = [.init(reason: .appleRevoked, severity: .critical, message: "The Apple ID was revoked.",
                                   action: "Sign in again: sudo photolalactl login")]
        #expect(revoked.userNeeds == ["The Apple ID was revoked. Sign in again: sudo photolalactl login"])
        var problem = signedIn()
        problem.problems = ["the metrics address 127.0.0.1:9469 is in use"]
        #expect(problem.userNeeds == ["the metrics address 127.0.0.1:9469 is in use"])
        var failed = signedIn()
        failed.queue.failed = 2
        #expect(failed.userNeeds == ["2 files could not be backed up: `photolalactl queue --failed` says why, `photolalactl retry` tries again."])
    }

    @Test func anInstancesSentencesNameItsCommands() throws {
        var s = signedIn()
        s.attention = [.init(reason: .appleRevoked, severity: .critical, message: "Revoked.",
                             action: "Sign in again: sudo photolalactl login", run: "sudo photolalactl login")]
        s.problems = ["the database is damaged: sudo systemctl restart photolalad"]
        s.address(to: try #require(Instance("alice")))
        #expect(s.instance == "alice" && s.ctl == "photolalactl --instance alice")
        #expect(s.attention[0].action == "Sign in again: sudo photolalactl --instance alice login")
        #expect(s.attention[0].run == "sudo photolalactl --instance alice login")
        #expect(s.problems == ["the database is damaged: sudo systemctl restart photolalad@alice"])
        #expect(StatusSummary.oneLine(DaemonStatus(state: .needsLogin)).hasPrefix("Not signed in: run photolalactl login"))
        var fresh = DaemonStatus(state: .needsLogin)
        fresh.instance = "alice"
        #expect(StatusSummary.oneLine(fresh).hasPrefix("Not signed in: run photolalactl --instance alice login"))
    }

    // MARK: status --all

    func row(_ name: String?, _ status: DaemonStatus?, code: Int32? = nil, error: String? = nil) -> InstanceList.Row {
        .init(instance: name, config: "/etc/photolala/\(name ?? "photolalad").toml", socket: "/run/photolala/\(name ?? "photolalad").sock",
              status: status, error: error, failureCode: code, needs: status?.userNeeds ?? [])
    }

    @Test func oneLineEachWithAccountBackedUpAndNeeds() {
        var alice = DaemonStatus(state: .needsLogin)
        alice.instance = "alice"
        let rows = [row(nil, signedIn()), row("alice", alice),
                    row("bob", nil, code: 3, error: "photolalad is not running (no daemon at /run/photolala/bob.sock); start it with: systemctl start photolalad@bob")]
        let lines = InstanceList.table(rows).split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines[0].hasPrefix("photolalad  signed in 550E8400  3 backed up (0 B)"))
        #expect(lines[0].hasSuffix("nothing needs you"))
        #expect(lines[1].hasPrefix("alice       not signed in") && lines[1].hasSuffix("Not signed in yet: run `photolalactl --instance alice login`."))
        #expect(lines[2].hasPrefix("bob         photolalad is not running") && lines[2].hasSuffix("systemctl start photolalad@bob"))
    }

    @Test func allExitsAsTheWorstInstance() {
        var needs = signedIn()
        needs.queue.failed = 1
        #expect(InstanceList.exitCode([row(nil, signedIn()), row("a", signedIn())], check: true) == 0)
        #expect(InstanceList.exitCode([row(nil, signedIn()), row("a", needs)], check: true) == 1)
        #expect(InstanceList.exitCode([row(nil, signedIn()), row("a", needs)], check: false) == 0)
        #expect(InstanceList.exitCode([row(nil, needs), row("a", nil, code: 3)], check: true) == 3)
        #expect(InstanceList.exitCode([row(nil, needs), row("a", nil, code: 4)], check: true) == 4)
    }

    @Test func allFindsTheConfigsOfTheDirectory() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("all-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let configured = "[watch]\nfolders = [\"/srv/photos\"]\n[daemon]\nsocket = \"\(dir)/NAME.sock\"\n"
        for name in ["zoe", "alice"] {
            try configured.replacingOccurrences(of: "NAME", with: name).write(toFile: "\(dir)/\(name).toml", atomically: true, encoding: .utf8)
        }
        // As shipped: no folder yet.
        try "[watch]\nfolders = []\n".write(toFile: dir + "/photolalad.toml", atomically: true, encoding: .utf8)
        for name in ["Bad Name.toml", "ca.pem"] { try "".write(toFile: dir + "/" + name, atomically: true, encoding: .utf8) }
        let rows = InstanceList.ask(in: dir, timeout: 1)
        #expect(rows.map(\.name) == ["photolalad", "Bad Name", "alice", "zoe"])
        #expect(rows.map(\.socket) == ["/run/photolala/photolalad.sock", "", "\(dir)/alice.sock", "\(dir)/zoe.sock"])
        #expect(rows[0].error?.hasPrefix("not set up: watch.folders = []") == true && rows[0].failureCode == nil)
        #expect(rows[1].error?.hasPrefix("not an instance: the name only lower-case letters") == true && rows[1].failureCode == 1)
        #expect(rows[2].failureCode == 3 && rows[2].error?.contains("no daemon at \(dir)/alice.sock") == true)
        #expect(rows.allSatisfy { $0.status == nil })
        // Not set up is said but is not a daemon down; the others are.
        #expect(InstanceList.exitCode([rows[0]], check: true) == 0)
        #expect(InstanceList.exitCode(rows, check: true) == 3)
        let json = InstanceList.json(rows)
        #expect(json.contains("\"instances\"") && json.contains("\"running\" : false") && json.contains("\"instance\" : null"))
    }
}
