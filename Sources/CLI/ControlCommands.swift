import ArgumentParser
import Control

/// The commands that send one request without arguments and print the daemon's answer
/// (cli.md): one shape, a route each.
package protocol ControlCommand: ParsableCommand {
    static var route: ControlRoute { get }
    var options: CtlOptions { get }
}

extension ControlCommand {
    package func run() throws { try CtlFailure.command(options, Self.route) }
}

package struct LogoutCommand: ParsableCommand {
    package init() {}
    package static let configuration = CommandConfiguration(
        commandName: "logout", abstract: "Forget the sign-in; uploads stop.",
        discussion: """
            Refused while this NAS holds the account's key and its recovery key was never shown (nor entered) \
            here since it was made or last rotated: that copy may be the only way into the account's manifests. \
            Show it first (sudo photolalactl recovery-key), or give --forget-key.
            """)
    @OptionGroup(title: "Global options") package var options: CtlOptions
    @Flag(name: .long, help: "Log out even though this NAS's recovery key was never shown: its copy of the account key is lost.")
    var forgetKey = false

    package func run() throws {
        let body = forgetKey ? ((try? ControlJSON.encode(LogoutRequest(forgetKey: true))) ?? []) : []
        try CtlFailure.command(options, .logout, body: body)
    }
}

package struct PauseCommand: ControlCommand {
    package init() {}
    package static let configuration = CommandConfiguration(commandName: "pause", abstract: "Stop uploading (hashing goes on; survives a restart).")
    package static let route = ControlRoute.pause
    @OptionGroup(title: "Global options") package var options: CtlOptions
}

package struct ResumeCommand: ControlCommand {
    package init() {}
    package static let configuration = CommandConfiguration(commandName: "resume", abstract: "Start uploading again.")
    package static let route = ControlRoute.resume
    @OptionGroup(title: "Global options") package var options: CtlOptions
}

package struct RescanCommand: ControlCommand {
    package init() {}
    package static let configuration = CommandConfiguration(commandName: "rescan", abstract: "Walk every watched folder again now.")
    package static let route = ControlRoute.rescan
    @OptionGroup(title: "Global options") package var options: CtlOptions
}

package struct RetryCommand: ControlCommand {
    package init() {}
    package static let configuration = CommandConfiguration(commandName: "retry", abstract: "Put failed files back in the queue and read photos without a preview again.")
    package static let route = ControlRoute.retry
    @OptionGroup(title: "Global options") package var options: CtlOptions
}
