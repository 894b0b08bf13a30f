import Control
import PhotolalaCore
import Testing
import Web

/// privacy.md "Names only for those who may read them": without a session the page shows
/// no file or folder name, no account id and no pairing code.
@Suite struct PublicViewTests {
    @Test func pathsAreScrubbedAndRatesAndURLsKept() {
        #expect(PublicView.scrub("cannot read /srv/photos/Family/IMG_0001.JPG: permission denied")
            == "cannot read (a path): permission denied")
        #expect(PublicView.scrub("disk full: the queue database (/var/lib/photolala/queue.db) cannot grow.")
            == "disk full: the queue database ((a path)) cannot grow.")
        #expect(PublicView.scrub("10MiB/s until 18:00") == "10MiB/s until 18:00")
        #expect(PublicView.scrub("HTTP 500 from https://s3.example/bucket/key") == "HTTP 500 from https://s3.example/bucket/key")
        #expect(PublicView.scrub("a / b") == "a / b")
        #expect(PublicView.scrub("\"/srv/x\"") == "\"(a path)\"")
    }

    @Test func theStatusLosesNamesButKeepsCounts() throws {
        var s = DaemonStatus(state: .running)
        s.account = .init(signedIn: true, userId: "user-123")
        s.watch.paths = ["/srv/photos/Alice"]
        s.watch.missingFolders = ["/srv/photos/Bob"]
        s.pairing = .init(userCode: "WDJB-MJHT", verificationUri: "https://x", verificationUriComplete: nil, expiresAt: nil)
        s.attention = [AttentionItem(reason: .folderMissing, severity: .warning, message: "The watched folder /srv/photos/Bob is missing",
                                     subject: "/srv/photos/Bob")]
        s.queue.uploaded = 42
        s.problems = ["cannot open /srv/photos/Alice/secret.jpg"]
        let view = PublicView.status(s)
        #expect(view.queue.uploaded == 42)
        #expect(view.watch.paths.isEmpty && view.watch.missingFolders.count == 1)
        #expect(view.account.userId == nil && view.account.signedIn)
        #expect(view.pairing == nil)
        #expect(view.attention.count == 1 && view.attention[0].subject == nil)
        let json = String(decoding: PublicView.scrubbed(try ControlJSONCheck.encode(view)), as: UTF8.self)
        for secret in ["Alice", "Bob", "user-123", "WDJB", "secret.jpg"] { #expect(!json.contains(secret)) }
        #expect(json.contains("\"uploaded\":42"))
        #expect(json.contains("\"signedIn\":true"))
    }
}

enum ControlJSONCheck {
    static func encode(_ s: DaemonStatus) throws -> [UInt8] { try ControlJSON.encode(s) }
}
