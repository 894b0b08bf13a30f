import ArgumentParser

struct RescanCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rescan", abstract: "Walk every watched folder again now.")
    @OptionGroup(title: "Global options") var options: CtlOptions
    func run() throws { try CtlFailure.command(options, .rescan) }
}
