import PhotolalaCore
import ArgumentParser
import Control

/// Turns a control failure into its one-line message and exit code.
package enum CtlFailure {
    /// cli.md's exit codes: 3 daemon not running, 4 permission denied, 1 anything else.
    package static func code(_ failure: ControlClient.Failure) -> Int32 {
        switch failure {
        case .notRunning: 3
        case .permissionDenied: 4
        case .protocolError, .timedOut: 1
        }
    }

    static func exit(_ failure: ControlClient.Failure) -> ExitCode {
        StandardError.print("photolalactl: \(failure)")
        return ExitCode(code(failure))
    }

    /// Sends a command that changes something and prints the daemon's answer.
    static func command(_ options: CtlOptions, _ route: ControlRoute, body: [UInt8] = []) throws {
        let client = options.client()
        do {
            let reply = try client.call(route, body: body, as: ControlReply.self)
            if reply.ok {
                print(reply.message)
            } else {
                StandardError.print("photolalactl: \(reply.message)")
                throw ExitCode(1)
            }
        } catch let failure as ControlClient.Failure {
            throw exit(failure)
        }
    }
}
