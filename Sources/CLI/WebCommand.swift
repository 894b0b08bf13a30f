import ArgumentParser
import Control
import Foundation
import PhotolalaCore

/// `photolalactl web --link | --revoke` (web.md): a one-time link that opens a session on
/// the status page, or the end of every session. Root or the daemon's user only.
struct WebCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "web",
        abstract: "A one-time link to the status page with a session, or end every session.",
        discussion: """
            Without a session the page only shows how the backup is doing; with one it can pause, resume, \
            retry, rescan and sign in. The link works once, within 10 minutes; the session it opens lasts \
            [web] session_ttl (12h).
            """)
    @OptionGroup(title: "Global options") var options: CtlOptions
    @Flag(name: .long, help: "Print a one-time link that opens a session on the page.") var link = false
    @Flag(name: .long, help: "End every session of the page now.") var revoke = false
    @Flag(name: .long, help: "With --link: print {\"url\", \"expiresAt\", \"page\"} as JSON.") var json = false

    func validate() throws {
        if link == revoke { throw ValidationError("say what to do: photolalactl web --link, or photolalactl web --revoke") }
    }

    func run() throws {
        if revoke { return try CtlFailure.command(options, .webRevoke) }
        let view: WebLinkView
        do {
            view = try options.client().call(.webLink, as: WebLinkView.self)
        } catch {
            throw CtlFailure.exit(error)
        }
        if json {
            print(String(decoding: (try? ControlJSON.encode(view, pretty: true)) ?? [], as: UTF8.self))
            return
        }
        print(Self.render(view), terminator: "")
    }

    static func render(_ view: WebLinkView) -> String {
        var lines = [
            "Open this link in a browser before \(view.expiresAt) (it works once) to manage photolalad from the status page:",
            "",
            "  \(view.url)",
            "",
            "Anyone who opens it first gets the session: do not share it. The page itself, read-only, is \(view.page)",
        ]
        if view.page.hasPrefix("http://") && !isLoopbackURL(view.page) {
            lines.append("This page is plain HTTP: on a network you do not trust, set [web] tls_cert and tls_key.")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func isLoopbackURL(_ url: String) -> Bool {
        url.contains("://127.") || url.contains("://localhost") || url.contains("://[::1]")
    }
}
