import ArgumentParser

struct RetryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "retry", abstract: "Put failed files back in the queue and read photos without a preview again.")
    @OptionGroup(title: "Global options") var options: CtlOptions
    func run() throws { try CtlFailure.command(options, .retry) }
}
