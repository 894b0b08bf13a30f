import ArgumentParser
import Config
import Control
import Foundation
import PhotolalaCore

/// `--socket` and `--config`: global, taken by `photolalactl` and by every command.
struct CtlOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The daemon's control socket.", valueName: "path"))
    var socket: String?

    @Option(name: .long, help: ArgumentHelp("The config file (to find the socket).", valueName: "path"))
    var config: String?

    /// --socket, then $PHOTOLALA_SOCKET, then daemon.socket of the config, then the default (config.md).
    func client(environment: [String: String] = ProcessInfo.processInfo.environment) -> ControlClient {
        let configPath = ConfigLoader.resolvePath(explicit: config, environment: environment)
        let fromConfig = ConfigLoader.controlSettings(path: configPath)
        let group = fromConfig.group ?? "photolala"
        if let socket, !socket.isEmpty { return ControlClient(socketPath: socket, groupHint: group) }
        if let env = environment["PHOTOLALA_SOCKET"], !env.isEmpty { return ControlClient(socketPath: env, groupHint: group) }
        return ControlClient(socketPath: fromConfig.socket ?? Settings.defaultSocket, groupHint: group)
    }
}
