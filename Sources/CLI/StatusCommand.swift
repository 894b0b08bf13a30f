#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Control
import Foundation
import PhotolalaCore

/// `photolalactl status [--json] [--all] [--check]`: the human screen, the status itself
/// as JSON, every instance on one line each, or only an exit code (cli.md).
package struct StatusCommand: ParsableCommand {
    package init() {}
    package static let configuration = CommandConfiguration(
        commandName: "status", abstract: "What the daemon is doing.",
        discussion: """
            --check prints nothing and exits 0 when nothing needs you, 1 when something does, 3 when the daemon \
            is not running (a container's HEALTHCHECK, a monitoring probe). --all shows every instance of \
            /etc/photolala on one line each.
            """)
    @OptionGroup(title: "Global options") package var options: CtlOptions
    @Flag(name: .long, help: "One JSON object (the stable fields of cli.md).") package var json = false
    @Flag(name: .long, help: "Every instance that has a config in /etc/photolala, one line each.") var all = false
    @Flag(name: .long, help: "No output: exit 0 when nothing needs you, 1 when something does, 3 when the daemon is down.")
    var check = false

    /// How long `--check` waits: a health probe must answer within the prober's own time-out.
    static let checkTimeout: TimeInterval = 10

    package func validate() throws {
        if all && (options.instance != nil || options.socket != nil || options.config != nil) {
            throw ValidationError("--all asks every instance of \(InstanceList.directory): leave out --instance, --socket and --config")
        }
        if check && json { throw ValidationError("--check prints nothing: leave out --json") }
    }

    package func run() throws {
        if all { return try runAll() }
        var client = options.client()
        if check { client.timeout = Self.checkTimeout }
        let status: DaemonStatus
        do {
            status = try client.call(.status, as: DaemonStatus.self)
        } catch {
            if check, case .notRunning = error { throw ExitCode(3) }
            throw CtlFailure.exit(error)
        }
        if check { throw ExitCode(status.userNeeds.isEmpty ? 0 : 1) }
        print(Self.render(status, json: json, color: isatty(1) != 0), terminator: "")
    }

    func runAll() throws {
        let rows = InstanceList.ask(timeout: check ? Self.checkTimeout : 30)
        if rows.isEmpty {
            if check { throw ExitCode(3) }
            StandardError.print("photolalactl: no instance: \(InstanceList.directory) has no photolalad.toml nor NAME.toml")
            throw ExitCode(3)
        }
        if !check {
            print(json ? InstanceList.json(rows) : InstanceList.table(rows), terminator: "")
        }
        throw ExitCode(InstanceList.exitCode(rows, check: check))
    }

    /// Human and `--json` print the same value: the JSON is the daemon's status encoded
    /// as the control socket carries it, nothing added or left out.
    package static func render(_ status: DaemonStatus, json: Bool, color: Bool, now: Date = Date()) -> String {
        if json {
            return String(decoding: (try? ControlJSON.encode(status, pretty: true)) ?? [], as: UTF8.self) + "\n"
        }
        return StatusRenderer.human(status, color: color, now: now)
    }
}
