import ArgumentParser
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
