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

    @Option(name: .long, help: ArgumentHelp(
        "Run the instance NAME (photolalad@NAME.service): /etc/photolala/NAME.toml, its state, socket and group (also $PHOTOLALA_INSTANCE).",
        valueName: "name"))
    var instance: String?

    @Flag(name: .long, help: "Validate the config file, print the effective settings and exit (0 good, 78 bad).")
    var checkConfig = false

    func run() async throws {
        let chosen: (instance: Instance?, fromFlag: Bool)
        do {
            chosen = try ConfigLoader.resolveInstance(flag: instance)
        } catch {
            StandardError.print(error.description)
            throw ExitCode(78)
        }
        let path = ConfigLoader.resolvePath(explicit: config, instance: chosen.instance, instanceFromFlag: chosen.fromFlag)
        let settings: Settings
        do {
            settings = try ConfigLoader.load(path: path, instance: chosen.instance)
        } catch {
            StandardError.print(error.description)
            StandardError.print("photolalad: configuration invalid (\(error.problems.count) problem\(error.problems.count == 1 ? "" : "s")): \(path)")
            throw ExitCode(78)
        }
        if checkConfig {
            print("# \(path): configuration ok; effective settings:")
            print(EffectiveSettings.toml(settings), terminator: "")
            // Valid on its own; beside the other instances' files it may still clash.
            let this = InstanceChecks.Peer(instance: chosen.instance, path: path, settings: settings)
            let (peers, unreadable) = InstanceChecks.peers(excluding: path)
            for line in InstanceChecks.warnings(this, others: peers) + unreadable {
                StandardError.print("photolalad: warning: \(line)")
            }
            return
        }
        LogLevelSwitch.bootstrap(settings.daemon.logLevel)
        do {
            try await Daemon(settings: settings, configPath: path, instance: chosen.instance).run()
        } catch {
            StandardError.print("photolalad: \(error)")
            throw ExitCode(1)
        }
    }
}
