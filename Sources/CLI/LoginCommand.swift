#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Control
import Foundation
import PhotolalaCore

/// `photolalactl login`: pairs the NAS from a phone (device code), or signs in with an
/// identity token from Sign in with Apple on another device.
struct LoginCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Sign this NAS in: prints a URL and a code to confirm on your phone, and waits.")
    @OptionGroup(title: "Global options") var options: CtlOptions
    @Option(name: .long, help: ArgumentHelp("An identity token from Sign in with Apple on another device.", valueName: "token"))
    var identityToken: String?
    @Option(name: .long, help: ArgumentHelp("The authorization code that came with the identity token.", valueName: "code"))
    var authorizationCode: String?

    func validate() throws {
        if authorizationCode != nil && identityToken == nil {
            throw ValidationError("--authorization-code goes with --identity-token")
        }
    }

    func run() throws {
        let client = options.client()
        do {
            if let identityToken {
                let body = try ControlJSON.encode(IdentityTokenLogin(identityToken: identityToken, authorizationCode: authorizationCode))
                let progress = try client.call(.loginIdentityToken, body: body, as: LoginProgress.self)
                try finish(progress)
                return
            }
            var progress = try client.call(.loginDeviceStart, as: LoginProgress.self)
            guard progress.state == .pending, let code = progress.userCode else {
                try finish(progress)
                return
            }
            print("""

              To sign this NAS in to Photolala, open on your phone:

                  \(progress.verificationUriComplete ?? progress.verificationUri ?? "")

              or go to \(progress.verificationUri ?? "") and enter the code:

                  \(code)

              Waiting for you to confirm… (Ctrl-C to cancel)
            """)
            // The code must show now, even when the output is a pipe (ssh, tee, a script).
            fflush(nil)
            let interrupted = InterruptFlag()
            while progress.state == .pending {
                if interrupted.isSet {
                    _ = try? client.send(.loginDeviceCancel)
                    StandardError.print("photolalactl: sign-in cancelled")
                    throw ExitCode(130)
                }
                usleep(300_000)
                progress = try client.call(.loginDevicePoll, as: LoginProgress.self)
            }
            try finish(progress)
        } catch let failure as ControlClient.Failure {
            throw CtlFailure.exit(failure)
        }
    }

    private func finish(_ progress: LoginProgress) throws {
        switch progress.state {
        case .signedIn:
            print("Signed in. Photolala user id: \(progress.userId ?? "?"). Uploads start now.")
        default:
            StandardError.print("photolalactl: sign-in failed: \(progress.message ?? progress.state.rawValue)")
            throw ExitCode(1)
        }
    }
}
