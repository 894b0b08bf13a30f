import ArgumentParser

struct PauseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "pause", abstract: "Stop uploading (hashing goes on; survives a restart).")
    @OptionGroup(title: "Global options") var options: CtlOptions
    func run() throws { try CtlFailure.command(options, .pause) }
}
