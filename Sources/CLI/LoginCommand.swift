#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Control
import Foundation
import PhotolalaCore

/// `photolalactl login`: pairs the NAS from a phone (device code), or signs in with an
/// identity token from Sign in with Apple on another device.
package struct LoginCommand: ParsableCommand {
    package init() {}
    package static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Sign this NAS in: prints a URL and a code to confirm on your phone, and waits.")
    @OptionGroup(title: "Global options") package var options: CtlOptions
    @Option(name: .long, help: ArgumentHelp("An identity token from Sign in with Apple on another device; \"-\" reads it from standard input (use that: a command line is visible to every user).", valueName: "token|-"))
    package var identityToken: String?
    @Option(name: .long, help: ArgumentHelp("The authorization code that came with the identity token; \"-\" reads it from standard input (after the token's line when both are \"-\").", valueName: "code|-"))
    package var authorizationCode: String?

    package func validate() throws {
        if authorizationCode != nil && identityToken == nil {
            throw ValidationError("--authorization-code goes with --identity-token")
        }
    }

    package func run() throws {
        let client = options.client()
        do {
            if let identityToken {
                let secrets: LoginSecrets
                do {
                    secrets = try LoginSecrets.resolve(identityToken: identityToken, authorizationCode: authorizationCode,
                                                       line: StandardInput.line(asking:))
                } catch {
                    StandardError.print("photolalactl: \(error)")
                    throw ExitCode(1)
                }
                if let warning = secrets.warning { StandardError.print("photolalactl: warning: \(warning)") }
                let body = try ControlJSON.encode(IdentityTokenLogin(identityToken: secrets.identityToken,
                                                                     authorizationCode: secrets.authorizationCode))
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
            if let hint = Self.keyHint(progress) { print("\n" + hint) }
        default:
            StandardError.print("photolalactl: sign-in failed: \(progress.message ?? progress.state.rawValue)")
            throw ExitCode(1)
        }
    }

    /// What the sign-in means for the account key (privacy.md): keep the recovery key this
    /// NAS just made, or give this NAS the one the account already has.
    package static func keyHint(_ progress: LoginProgress) -> String? {
        if progress.accountKeyCreated == true {
            return """
                This NAS made the key that encrypts this account's backup manifests. Run

                    sudo photolalactl recovery-key

                now and keep the recovery key it shows somewhere other than this NAS (a password manager, or
                printed and put away): without it, a new NAS cannot read what was backed up where.
                """
        }
        switch progress.recovery {
        case .needed?:
            return """
                This account already has a recovery key. Photos upload now; this NAS's manifest waits until you enter it:

                    sudo photolalactl recovery-key --enter

                (`sudo photolalactl recovery-key` on a NAS of this account that holds it shows it.)
                """
        case .unreadable?:
            return "This account's key object in the bucket cannot be used: see `photolalactl status`. Photos upload meanwhile."
        case .checking?, nil:
            return "This account's key is still being checked in the bucket: `photolalactl status` shows where it stands (recovery)."
        default:
            return nil
        }
    }
}

/// The identity token and authorization code of `login`: from the command line, or, given
/// as "-", one line each from standard input (both "-": the token's line, then the code's).
package struct LoginSecrets: Equatable {
    package var identityToken: String
    package var authorizationCode: String?
    /// The options whose value was on the command line, where every user sees it.
    var onCommandLine: [String] = []

    package struct Missing: Error, Equatable, CustomStringConvertible {
        var what: String
        var option: String
        package var description: String {
            "standard input held no \(what) (\(option) - reads it from there, one line)"
        }
    }

    /// `line(what)` reads the next line of standard input (`what` names it on a terminal).
    package static func resolve(identityToken: String, authorizationCode: String?, line: (String) -> String?) throws(Missing) -> LoginSecrets {
        func value(_ given: String, _ what: String, _ option: String) throws(Missing) -> (String, Bool) {
            guard given == "-" else { return (given, true) }
            // A pasted token may carry a CR or spaces around it; a token or code has none inside.
            guard let read = line(what)?.trimmingCharacters(in: .whitespacesAndNewlines), !read.isEmpty else {
                throw Missing(what: what, option: option)
            }
            return (read, false)
        }
        let (token, tokenVisible) = try value(identityToken, "identity token", "--identity-token")
        var secrets = LoginSecrets(identityToken: token)
        if tokenVisible { secrets.onCommandLine.append("--identity-token") }
        if let authorizationCode {
            let (code, codeVisible) = try value(authorizationCode, "authorization code", "--authorization-code")
            secrets.authorizationCode = code
            if codeVisible { secrets.onCommandLine.append("--authorization-code") }
        }
        return secrets
    }

    /// What to tell the user who put a secret on the command line, or nil.
    package var warning: String? {
        guard !onCommandLine.isEmpty else { return nil }
        let what = onCommandLine.count == 2 ? "the identity token and the authorization code are" :
            onCommandLine[0] == "--identity-token" ? "the identity token is" : "the authorization code is"
        let instead = onCommandLine.map { "\($0) -" }.joined(separator: " ")
        return "\(what) visible to other users on the command line (ps, /proc) and kept in your shell's history; "
            + "pass \(onCommandLine.count == 2 ? "them" : "it") on standard input instead: \(instead)"
    }
}

/// Lines of standard input for secrets.
enum StandardInput {
    /// The next line; on a terminal, asked for on stderr first (without it, nothing shows
    /// that the command waits).
    static func line(asking what: String) -> String? {
        if isatty(0) == 1 { StandardError.write("Paste the \(what) and press Enter: ") }
        return readLine(strippingNewline: true)
    }
}
