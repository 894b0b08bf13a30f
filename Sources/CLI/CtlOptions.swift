import ArgumentParser
import Config
import Control
import Foundation
import PhotolalaCore

/// `--socket`, `--config` and `--instance`: global, taken by `photolalactl` and by every command.
package struct CtlOptions: ParsableArguments {
    package init() {}
    @Option(name: .long, help: ArgumentHelp("The daemon's control socket.", valueName: "path"))
    package var socket: String?

    @Option(name: .long, help: ArgumentHelp("The config file (to find the socket).", valueName: "path"))
    package var config: String?

    @Option(name: .long, help: ArgumentHelp(
        "The instance NAME (photolalad@NAME.service, /etc/photolala/NAME.toml); also $PHOTOLALA_INSTANCE.",
        valueName: "name"))
    var instance: String?

    package func validate() throws {
        do {
            _ = try ConfigLoader.resolveInstance(flag: instance)
        } catch {
            throw ValidationError(error.problems.map(\.description).joined(separator: "; "))
        }
    }

    /// --socket, then $PHOTOLALA_SOCKET, then daemon.socket of the config, then the
    /// default of the instance (config.md "Where the daemon looks", "Instances").
    package func client(environment: [String: String] = ProcessInfo.processInfo.environment) -> ControlClient {
        let chosen: (instance: Instance?, fromFlag: Bool) =
            (try? ConfigLoader.resolveInstance(flag: instance, environment: environment)) ?? (nil, true)
        let configPath = ConfigLoader.resolvePath(explicit: config, instance: chosen.instance, instanceFromFlag: chosen.fromFlag,
                                                  environment: environment)
        return Self.client(configPath: configPath, instance: chosen.instance, socket: socket, environment: environment)
    }

    /// The client for one instance's config file: `status --all` asks each in turn, where
    /// the environment's socket would name only one of them.
    static func client(configPath: String, instance: Instance?, socket: String? = nil, environment: [String: String] = [:]) -> ControlClient {
        let defaults = Settings(instance: instance)
        let fromConfig = ConfigLoader.controlSettings(path: configPath)
        let group = fromConfig.group ?? defaults.daemon.socketGroup
        if let socket, !socket.isEmpty { return ControlClient(socketPath: socket, groupHint: group) }
        if let env = environment["PHOTOLALA_SOCKET"], !env.isEmpty { return ControlClient(socketPath: env, groupHint: group) }
        return ControlClient(socketPath: fromConfig.socket ?? defaults.daemon.socket, groupHint: group)
    }
}
