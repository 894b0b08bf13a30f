import ArgumentParser
import Config
import Daemon
import Foundation
import PhotolalaCore

/// `photolalad [--config PATH]`, `--check-config`, `--version` (cli.md).
struct DaemonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "photolalad",
        abstract: "The Photolala backup agent: watches photo folders and uploads every photo to your Photolala storage.",
        discussion: "Runs in the foreground (systemd starts it). Called as photolalactl, or as `photolalad ctl`, it is the control client.",
        version: PhotolalaVersion.current)

    @Option(name: .long, help: ArgumentHelp("The config file.", valueName: "path"))
    var config: String?

    @Flag(name: .long, help: "Validate the config file, print the effective settings and exit (0 good, 78 bad).")
    var checkConfig = false

    func run() async throws {
        let path = ConfigLoader.resolvePath(explicit: config)
        let settings: Settings
        do {
            settings = try ConfigLoader.load(path: path)
        } catch {
            StandardError.print(error.description)
            StandardError.print("photolalad: configuration invalid (\(error.problems.count) problem\(error.problems.count == 1 ? "" : "s")): \(path)")
            throw ExitCode(78)
        }
        if checkConfig {
            print("# \(path): configuration ok; effective settings:")
            print(EffectiveSettings.toml(settings), terminator: "")
            return
        }
        LogLevelSwitch.bootstrap(settings.daemon.logLevel)
        do {
            try await Daemon(settings: settings, configPath: path).run()
        } catch {
            StandardError.print("photolalad: \(error)")
            throw ExitCode(1)
        }
    }
}
