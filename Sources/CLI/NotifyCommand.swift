import ArgumentParser
import Foundation
import Control
import PhotolalaCore

/// `photolalactl notify --test`: the daemon sends a test event through every configured
/// channel (config.md `[notify]`) and says what each answered. Exit 0 when every channel
/// took it, 1 when any did not (or none is configured).
package struct NotifyCommand: ParsableCommand {
    package init() {}
    package static let configuration = CommandConfiguration(
        commandName: "notify",
        abstract: "Send a test notification through every configured channel.",
        discussion: "The channels are set in [notify] of the config file: webhook, command, healthcheck_url.")
    @OptionGroup(title: "Global options") var options: CtlOptions
    @Flag(name: .long, help: "Send a test event through each channel and print what each answered.") var test = false

    package func validate() throws {
        if !test { throw ValidationError("say what to do: photolalactl notify --test") }
    }

    package func run() throws {
        var client = options.client()
        // A command may take its whole 30 s, a webhook its 25 s: wait for the slowest.
        client.timeout = 75
        let report: NotifyTestReport
        do {
            report = try client.call(.notifyTest, as: NotifyTestReport.self)
        } catch {
            throw CtlFailure.exit(error)
        }
        print(Self.render(report), terminator: "")
        if report.results.isEmpty || report.results.contains(where: { !$0.ok }) { throw ExitCode(1) }
    }

    package static func render(_ report: NotifyTestReport) -> String {
        if report.results.isEmpty {
            return "No notification channel is configured: set webhook, command or healthcheck_url under [notify] "
                + "in the config file, then `systemctl reload photolalad`.\n"
        }
        let width = report.results.map(\.channel.count).max() ?? 0
        return report.results.map { r in
            let name = r.channel.padding(toLength: width, withPad: " ", startingAt: 0)
            return "\(name)  \(r.ok ? "ok    " : "FAILED")  \(r.answer)"
        }.joined(separator: "\n") + "\n"
    }
}
