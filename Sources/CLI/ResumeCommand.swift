import ArgumentParser

struct ResumeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "resume", abstract: "Start uploading again.")
    @OptionGroup(title: "Global options") var options: CtlOptions
    func run() throws { try CtlFailure.command(options, .resume) }
}
