import ArgumentParser
import Control
import Foundation
import Testing
import CLI

/// The command line of cli.md: `--socket` and `--config` before or after the command's
/// name, for `photolalactl` and `photolalad ctl` alike.
@Suite struct CtlParsingTests {
    /// The parsed command and the global options it will use.
    func parse(_ args: [String]) throws -> (ParsableCommand, CtlOptions) {
        let command = try Ctl.parseAsRoot(args)
        let options: CtlOptions? = switch command {
        case let c as StatusCommand: c.options
        case let c as QueueCommand: c.options
        case let c as LoginCommand: c.options
        case let c as LogoutCommand: c.options
        case let c as PauseCommand: c.options
        case let c as ResumeCommand: c.options
        case let c as RescanCommand: c.options
        case let c as RetryCommand: c.options
        case let c as FilesCommand: c.options
        case let c as VerifyCommand: c.options
        case let c as AuditCommand: c.options
        default: nil
        }
        return (command, try #require(options, "\(type(of: command)) is not a photolalactl command"))
    }

    static let commands = ["status", "login", "logout", "pause", "resume", "rescan", "queue", "retry", "files", "verify", "audit"]

    @Test func socketBeforeTheCommand() throws {
        let (command, options) = try parse(["--socket", "/run/s.sock", "status", "--json"])
        let status = try #require(command as? StatusCommand)
        #expect(status.json)
        #expect(options.socket == "/run/s.sock" && options.config == nil)
    }

    @Test func socketAfterTheCommand() throws {
        let (command, options) = try parse(["status", "--socket", "/run/s.sock"])
        #expect(command is StatusCommand)
        #expect(options.socket == "/run/s.sock")
    }

    @Test func equalsForms() throws {
        #expect(try parse(["--socket=/a", "status"]).1.socket == "/a")
        #expect(try parse(["status", "--socket=/b", "--json"]).1.socket == "/b")
        #expect(try parse(["--config=/etc/x.toml", "pause"]).1.config == "/etc/x.toml")
        #expect(try parse(["resume", "--config=/etc/y.toml"]).1.config == "/etc/y.toml")
    }

    @Test func bothGlobalsOnEitherSideWithTheCommandsOwnOptions() throws {
        let (command, options) = try parse(["--config", "/etc/c.toml", "queue", "--failed", "--socket", "/s", "--limit", "5"])
        let queue = try #require(command as? QueueCommand)
        #expect(queue.failed && queue.limit == 5 && !queue.json)
        #expect(options.socket == "/s" && options.config == "/etc/c.toml")
    }

    @Test(arguments: commands)
    func everyCommandTakesThemBeforeAndAfter(name: String) throws {
        #expect(try parse(["--socket", "/before", name]).1.socket == "/before")
        #expect(try parse([name, "--socket", "/after"]).1.socket == "/after")
        #expect(try parse(["--config", "/c", name]).1.config == "/c")
        #expect(try parse([name, "--config", "/c"]).1.config == "/c")
    }

    @Test func theLastOfTwoWins() throws {
        #expect(try parse(["--socket", "/first", "status", "--socket", "/second"]).1.socket == "/second")
    }

    @Test func withoutGlobalsNothingIsSet() throws {
        let options = try parse(["status"]).1
        #expect(options.socket == nil && options.config == nil)
    }

    @Test func photolalactlByItsName() {
        #expect(Entry.face(of: ["/usr/bin/photolalactl", "--socket", "/s", "status"]) == .ctl(["--socket", "/s", "status"]))
        #expect(Entry.face(of: ["photolalactl"]) == .ctl([]))
    }

    @Test func photolaladCtlIsTheSameCommandLine() throws {
        let face = Entry.face(of: ["/usr/bin/photolalad", "ctl", "--socket", "/s", "status", "--json"])
        guard case .ctl(let args) = face else { Issue.record("not the CLI: \(face)"); return }
        #expect(args == ["--socket", "/s", "status", "--json"])
        let (command, options) = try parse(args)
        #expect((command as? StatusCommand)?.json == true && options.socket == "/s")
        #expect(Entry.face(of: ["photolalad", "ctl", "status", "--socket", "/s"]) == .ctl(["status", "--socket", "/s"]))
    }

    @Test func otherwiseItIsTheDaemon() {
        #expect(Entry.face(of: ["/usr/bin/photolalad"]) == .daemon([]))
        #expect(Entry.face(of: ["photolalad", "--config", "/etc/p.toml"]) == .daemon(["--config", "/etc/p.toml"]))
        #expect(Entry.face(of: ["photolalad", "--check-config", "ctl"]) == .daemon(["--check-config", "ctl"]))
    }

    @Test(arguments: [["status", "--bogus"], ["--bogus", "status"], ["queue", "--socket"]])
    func unknownOrIncompleteOptionsAreUsageErrors(args: [String]) {
        do {
            _ = try Ctl.parseAsRoot(args)
            Issue.record("\(args) parsed")
        } catch {
            #expect(Ctl.exitCode(for: error) == .validationFailure)
            let message = Ctl.message(for: error)
            #expect(message.contains("--bogus") || message.contains("--socket"), "\(message)")
        }
    }

    @Test func anUnknownCommandIsAUsageError() {
        #expect(throws: (any Error).self) { try Ctl.parseAsRoot(["--socket", "/s", "stauts"]) }
    }

    @Test func commandsCheckTheirOwnOptions() {
        do {
            _ = try Ctl.parseAsRoot(["queue", "--limit", "0", "--socket", "/s"])
            Issue.record("--limit 0 parsed")
        } catch {
            #expect(Ctl.message(for: error).contains("--limit must be at least 1"))
        }
        do {
            _ = try Ctl.parseAsRoot(["--socket", "/s", "login", "--authorization-code", "c"])
            Issue.record("a code without a token parsed")
        } catch {
            #expect(Ctl.message(for: error).contains("--authorization-code goes with --identity-token"))
        }
    }

    @Test func helpShowsTheGlobalOptionsOnce() {
        for help in [Ctl.helpMessage(), Ctl.helpMessage(for: StatusCommand.self), Ctl.helpMessage(for: QueueCommand.self)] {
            let lines = help.split(separator: "\n")
            #expect(lines.filter { $0.hasPrefix("  --socket <path>") }.count == 1, "\(help)")
            #expect(lines.filter { $0.hasPrefix("  --config <path>") }.count == 1, "\(help)")
            #expect(lines.contains("GLOBAL OPTIONS:"), "\(help)")
        }
        #expect(Ctl.helpMessage().contains("before or after the command"))
    }

    @Test func versionBeforeOrAfterAGlobal() {
        for args in [["--version"], ["--socket", "/s", "--version"]] {
            do {
                _ = try Ctl.parseAsRoot(args)
                Issue.record("\(args) parsed")
            } catch {
                #expect(Ctl.message(for: error) == "0.1.0")
                #expect(Ctl.exitCode(for: error) == .success)
            }
        }
    }
}
