import ArgumentParser

struct LogoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "logout", abstract: "Forget the sign-in; uploads stop.")
    @OptionGroup(title: "Global options") var options: CtlOptions
    func run() throws { try CtlFailure.command(options, .logout) }
}
