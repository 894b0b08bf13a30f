#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Control
import Foundation
import PhotolalaCore
import Vault

/// `photolalactl recovery-key [--json] | --enter | --rotate [--json]` (privacy.md): shows
/// the account's recovery key, takes it from standard input (never the command line), or
/// replaces it. Root and the daemon's user only: group members get exit 4.
package struct RecoveryKeyCommand: ParsableCommand {
    package init() {}
    package static let configuration = CommandConfiguration(
        commandName: "recovery-key",
        abstract: "Show this account's recovery key, enter it on a new NAS (--enter), or replace it (--rotate).",
        discussion: """
            The recovery key is the only thing that opens this account's key anywhere but on its NASes: a new NAS \
            needs it to read the backups' manifests (what was where). Keep it somewhere other than this NAS. \
            --enter reads it from standard input (it asks on a terminal); it is never taken from the command line.
            """)
    @OptionGroup(title: "Global options") var options: CtlOptions
    @Flag(name: .long, help: "One JSON object {\"recoveryKey\", \"fingerprint\", \"createdAt\", \"outdated\"}.") var json = false
    @Flag(name: .long, help: "Read this account's recovery key from standard input, check it and keep it.") var enter = false
    @Flag(name: .long, help: "Make a new recovery key for the same account key; the old one opens nothing afterwards.") var rotate = false
    @Flag(name: .customLong("new-account-key"),
          help: "With --rotate: a new account key too; every manifest object of every device is sealed again under it.")
    var newAccountKey = false

    package func validate() throws {
        if enter && rotate { throw ValidationError("--enter and --rotate are two different things: give one") }
        if enter && json { throw ValidationError("--enter prints no key: it takes no --json") }
        if newAccountKey && !rotate { throw ValidationError("--new-account-key goes with --rotate: recovery-key --rotate --new-account-key") }
    }

    package func run() throws {
        let client = options.client()
        if enter {
            try enterKey(client)
            return
        }
        let (status, body): (Int, [UInt8])
        do {
            if newAccountKey {
                // Every object of the account is sealed again before the answer: minutes for
                // a big account. The daemon goes on by itself if this command is stopped.
                var long = client
                long.timeout = 3600
                (status, body) = try long.send(.recoveryKeyNewAccountKey)
            } else {
                (status, body) = try client.send(rotate ? .recoveryKeyRotate : .recoveryKey)
            }
        } catch {
            throw CtlFailure.exit(error)
        }
        let view = try Self.answer(RecoveryKeyView.self, status: status, body: body, client: client)
        print(Self.render(view, rotated: rotate, json: json), terminator: "")
    }

    private func enterKey(_ client: ControlClient) throws {
        guard let text = SecretInput.line(asking: "this account's recovery key (8 groups of 4 characters)") else {
            StandardError.print("photolalactl: standard input held no recovery key (recovery-key --enter reads it from there, one line)")
            throw ExitCode(1)
        }
        // Checked here first: a typo is caught before anything is sent.
        let key: RecoveryKey
        do {
            key = try RecoveryKey.parse(text)
        } catch {
            StandardError.print("photolalactl: \(error). Nothing was changed.")
            throw ExitCode(1)
        }
        let (status, body): (Int, [UInt8])
        do {
            (status, body) = try client.send(.recoveryKeyEnter, body: try ControlJSON.encode(RecoveryKeyEntry(recoveryKey: key.formatted)))
        } catch let failure as ControlClient.Failure {
            throw CtlFailure.exit(failure)
        }
        let reply = try Self.answer(ControlReply.self, status: status, body: body, client: client)
        print(reply.message)
    }

    /// A 2xx answer decoded; a refusal's sentence on stderr with exit 1; 403 exit 4.
    static func answer<T: Decodable>(_ type: T.Type, status: Int, body: [UInt8], client: ControlClient) throws -> T {
        let reply = try? ControlJSON.decode(ControlReply.self, from: body)
        if status == 403 {
            throw CtlFailure.exit(.permissionDenied(hint: reply?.message ?? "permission denied: only root and the daemon's user may see or change the recovery key"))
        }
        if (200..<300).contains(status), let value = try? ControlJSON.decode(T.self, from: body) { return value }
        StandardError.print("photolalactl: \(reply?.message ?? "unexpected answer from photolalad (HTTP \(status))")")
        throw ExitCode(1)
    }

    package static func render(_ view: RecoveryKeyView, rotated: Bool, json: Bool) -> String {
        if json {
            return String(decoding: (try? ControlJSON.encode(view, pretty: true)) ?? [], as: UTF8.self) + "\n"
        }
        if let previous = view.previousFingerprint {
            var out = [
                "New recovery key:  \(view.recoveryKey)",
                "New account key:   fingerprint \(view.fingerprint) (it replaces \(previous))",
                "Made:              \(view.createdAt)",
                "",
                "Every object of this account's manifests was sealed again under the new account key (\(view.sealed ?? 0) objects of "
                    + "\(view.devices ?? 0) devices).",
                "The previous recovery key, and any copy of the previous key object, open nothing written from now on.",
                "Other NASes of this account now ask for the new recovery key: enter it there with",
                "`sudo photolalactl recovery-key --enter`. Keep it somewhere other than this NAS.",
            ]
            if let unreadable = view.unreadable, !unreadable.isEmpty {
                out.append("")
                out.append("Left as they were (they opened under neither key): " + unreadable.joined(separator: ", "))
            }
            return out.joined(separator: "\n") + "\n"
        }
        var out = [
            rotated ? "New recovery key:  \(view.recoveryKey)" : "Recovery key:  \(view.recoveryKey)",
            "Account key:   fingerprint \(view.fingerprint) (the same on every NAS of this account)",
            "Made:          \(view.createdAt)",
            "",
        ]
        if view.outdated {
            out.append("This copy is outdated: the recovery key was replaced on another NAS (recovery-key --rotate) and this one")
            out.append("opens nothing any more. Backups go on (the account key is the same). Get the new one there with")
            out.append("`sudo photolalactl recovery-key`, or enter it here with `sudo photolalactl recovery-key --enter`.")
        } else if rotated {
            out.append("The previous recovery key opens nothing in the bucket any more (a copy of the old key object kept by")
            out.append("bucket versioning still opens with it). Other NASes of this account keep backing up; their copies of")
            out.append("the recovery key are now outdated. Keep this one somewhere other than this NAS.")
        } else {
            out.append("Keep it somewhere other than this NAS (a password manager, or printed and put away): a new NAS of")
            out.append("this account needs it to read what was backed up where. Nobody, Photolala included, can recover it.")
        }
        return out.joined(separator: "\n") + "\n"
    }
}

/// A secret line from standard input: asked for on a terminal (without echo), read as is
/// from a pipe. Never from the command line, where every user sees it.
enum SecretInput {
    static let maxLength = 1024

    static func line(asking what: String) -> String? {
        guard isatty(0) == 1 else { return bounded(readLine(strippingNewline: true)) }
        StandardError.write("Type or paste \(what) and press Enter: ")
        var saved = termios()
        let quiet = tcgetattr(0, &saved) == 0
        if quiet {
            echoing = saved
            // Ctrl-C while the echo is off must not leave the terminal silent.
            signal(SIGINT) { _ in
                if var restore = SecretInput.echoing { tcsetattr(0, TCSAFLUSH, &restore) }
                _exit(130)
            }
            var silent = saved
            silent.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(0, TCSAFLUSH, &silent)
        }
        defer {
            if quiet {
                tcsetattr(0, TCSAFLUSH, &saved)
                signal(SIGINT, SIG_DFL)
                StandardError.write("\n")
            }
        }
        return bounded(readLine(strippingNewline: true))
    }

    /// The terminal's settings while the echo is off, for the SIGINT handler (set once,
    /// before the handler is installed; the command is single-threaded).
    nonisolated(unsafe) static var echoing: termios?

    private static func bounded(_ line: String?) -> String? {
        guard let line, !line.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
        return String(line.prefix(maxLength))
    }
}
