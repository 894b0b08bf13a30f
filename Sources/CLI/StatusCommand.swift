#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Control
import Foundation
import PhotolalaCore

/// `photolalactl status [--json]`: the human screen, or the status itself as JSON.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "What the daemon is doing.")
    @OptionGroup(title: "Global options") var options: CtlOptions
    @Flag(name: .long, help: "One JSON object (the stable fields of cli.md).") var json = false

    func run() throws {
        let status: DaemonStatus
        do {
            status = try options.client().call(.status, as: DaemonStatus.self)
        } catch {
            throw CtlFailure.exit(error)
        }
        print(Self.render(status, json: json, color: isatty(1) != 0), terminator: "")
    }

    /// Human and `--json` print the same value: the JSON is the daemon's status encoded
    /// as the control socket carries it, nothing added or left out.
    static func render(_ status: DaemonStatus, json: Bool, color: Bool, now: Date = Date()) -> String {
        if json {
            return String(decoding: (try? ControlJSON.encode(status, pretty: true)) ?? [], as: UTF8.self) + "\n"
        }
        return StatusRenderer.human(status, color: color, now: now)
    }
}
