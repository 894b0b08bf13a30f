import ArgumentParser
import PhotolalaCore

/// `photolalactl`: asks the daemon over its control socket. Exit codes (cli.md): 0 ok,
/// 3 daemon not running, 4 permission denied, 1 anything else.
///
/// `--socket` and `--config` are global: declared here and in every command as the same
/// `CtlOptions` group. The root's parse takes them wherever they stand, before or after
/// the command's name, and the command's group is handed the value the root decoded, so
/// `photolalactl --socket S status` and `photolalactl status --socket S` are one call.
package struct Ctl: AsyncParsableCommand {
    package init() {}
    package static let configuration = CommandConfiguration(
        commandName: "photolalactl",
        abstract: "Control photolalad, the Photolala backup agent.",
        discussion: "The global options --socket and --config may come before or after the command.",
        version: PhotolalaVersion.current,
        subcommands: [StatusCommand.self, LoginCommand.self, LogoutCommand.self, PauseCommand.self, ResumeCommand.self,
                      RescanCommand.self, QueueCommand.self, RetryCommand.self, FilesCommand.self, VerifyCommand.self,
                      DevicesCommand.self, RestoreCommand.self, RecoveryKeyCommand.self, NotifyCommand.self,
                      AuditCommand.self, WebCommand.self, MirrorCommand.self])

    @OptionGroup(title: "Global options") var options: CtlOptions
}
