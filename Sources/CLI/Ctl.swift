import ArgumentParser
import Config
import Control
import Foundation
import PhotolalaCore

/// `photolalactl`: asks the daemon over its control socket. Exit codes (cli.md): 0 ok,
/// 3 daemon not running, 4 permission denied, 1 anything else.
struct Ctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "photolalactl",
        abstract: "Control photolalad, the Photolala backup agent.",
        version: PhotolalaVersion.current,
        subcommands: [StatusCommand.self, LoginCommand.self, LogoutCommand.self, PauseCommand.self, ResumeCommand.self,
                      RescanCommand.self, QueueCommand.self, RetryCommand.self])
}

/// `--socket` and `--config`, taken by every command.
struct CtlOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The daemon's control socket.", valueName: "path"))
    var socket: String?

    @Option(name: .long, help: ArgumentHelp("The config file (to find the socket).", valueName: "path"))
    var config: String?

    /// --socket, then $PHOTOLALA_SOCKET, then daemon.socket of the config, then the default (config.md).
    func client(environment: [String: String] = ProcessInfo.processInfo.environment) -> ControlClient {
        let configPath = ConfigLoader.resolvePath(explicit: config, environment: environment)
        let fromConfig = ConfigLoader.controlSettings(path: configPath)
        let group = fromConfig.group ?? "photolala"
        if let socket, !socket.isEmpty { return ControlClient(socketPath: socket, groupHint: group) }
        if let env = environment["PHOTOLALA_SOCKET"], !env.isEmpty { return ControlClient(socketPath: env, groupHint: group) }
        return ControlClient(socketPath: fromConfig.socket ?? Settings.defaultSocket, groupHint: group)
    }
}

/// Turns a control failure into its one-line message and exit code.
enum CtlFailure {
    static func exit(_ failure: ControlClient.Failure) -> ExitCode {
        StandardError.print("photolalactl: \(failure)")
        switch failure {
        case .notRunning: return ExitCode(3)
        case .permissionDenied: return ExitCode(4)
        case .protocolError, .timedOut: return ExitCode(1)
        }
    }

    /// Sends a command that changes something and prints the daemon's answer.
    static func command(_ options: CtlOptions, _ route: ControlRoute, body: [UInt8] = []) throws {
        let client = options.client()
        do {
            let reply = try client.call(route, body: body, as: ControlReply.self)
            if reply.ok {
                print(reply.message)
            } else {
                StandardError.print("photolalactl: \(reply.message)")
                throw ExitCode(1)
            }
        } catch let failure as ControlClient.Failure {
            throw exit(failure)
        }
    }
}

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "What the daemon is doing.")
    @OptionGroup var options: CtlOptions
    @Flag(name: .long, help: "One JSON object (the stable fields of cli.md).") var json = false

    func run() throws {
        let status: DaemonStatus
        do {
            status = try options.client().call(.status, as: DaemonStatus.self)
        } catch {
            throw CtlFailure.exit(error)
        }
        if json {
            print(String(decoding: (try? ControlJSON.encode(status, pretty: true)) ?? [], as: UTF8.self))
        } else {
            print(StatusRenderer.human(status, color: isatty(1) != 0), terminator: "")
        }
    }
}

struct PauseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "pause", abstract: "Stop uploading (hashing goes on; survives a restart).")
    @OptionGroup var options: CtlOptions
    func run() throws { try CtlFailure.command(options, .pause) }
}

struct ResumeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "resume", abstract: "Start uploading again.")
    @OptionGroup var options: CtlOptions
    func run() throws { try CtlFailure.command(options, .resume) }
}

struct RescanCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rescan", abstract: "Walk every watched folder again now.")
    @OptionGroup var options: CtlOptions
    func run() throws { try CtlFailure.command(options, .rescan) }
}

struct RetryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "retry", abstract: "Put failed files back in the queue.")
    @OptionGroup var options: CtlOptions
    func run() throws { try CtlFailure.command(options, .retry) }
}

struct LogoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "logout", abstract: "Forget the sign-in; uploads stop.")
    @OptionGroup var options: CtlOptions
    func run() throws { try CtlFailure.command(options, .logout) }
}

struct QueueCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "queue", abstract: "Files waiting, uploading or failed, with why.")
    @OptionGroup var options: CtlOptions
    @Flag(name: .long, help: "Only failed files.") var failed = false
    @Option(name: .long, help: "At most this many files (newest first).") var limit = 100
    @Flag(name: .long, help: "One JSON object {\"items\": [...], \"total\": N}.") var json = false

    func validate() throws {
        guard limit > 0 else { throw ValidationError("--limit must be at least 1") }
    }

    func run() throws {
        let listing: QueueListing
        do {
            var query = ["limit": "\(limit)"]
            if failed { query["failed"] = "1" }
            listing = try options.client().call(.queue, query: query, as: QueueListing.self)
        } catch {
            throw CtlFailure.exit(error)
        }
        if json {
            print(String(decoding: (try? ControlJSON.encode(listing, pretty: true)) ?? [], as: UTF8.self))
            return
        }
        if listing.items.isEmpty {
            print(failed ? "No failed files." : "Nothing waiting: every file is backed up.")
            return
        }
        for item in listing.items {
            let why = item.lastError.map { " — \($0)" } ?? ""
            print("\(item.state.padding(toLength: 9, withPad: " ", startingAt: 0)) \(Units.humanBytes(item.size).padding(toLength: 9, withPad: " ", startingAt: 0)) \(item.path)\(why)")
        }
        if listing.total > listing.items.count {
            print("… \(listing.total - listing.items.count) more (--limit)")
        }
    }
}
