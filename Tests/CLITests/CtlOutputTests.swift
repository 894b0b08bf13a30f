import Control
import Foundation
import PhotolalaCore
import Testing
import CLI

/// What `status --json` and `queue` print.
@Suite struct CtlOutputTests {
    @Test func statusJSONIsTheDaemonStatusEncoding() throws {
        var s = DaemonStatus(state: .paused)
        s.pauseReason = .quotaExceeded
        s.account = .init(signedIn: true, userId: "550E8400-E29B-41D4-A716-446655440000")
        s.queue.pending = 12
        s.queue.uploadedBytes = 912_345_678_901
        s.watch.missingFolders = ["/srv/gone"]
        let out = StatusCommand.render(s, json: true, color: true)
        #expect(out == String(decoding: try ControlJSON.encode(s, pretty: true), as: UTF8.self) + "\n")
        #expect(try JSONDecoder().decode(DaemonStatus.self, from: Data(out.utf8)) == s)
        #expect(!out.contains("\u{1B}["), "no color in JSON, even on a terminal")
    }

    @Test func statusJSONKeepsTheContractsNulls() throws {
        let out = StatusCommand.render(DaemonStatus(state: .needsLogin), json: true, color: false)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any])
        #expect(object["state"] as? String == "needsLogin")
        #expect(object["pauseReason"] is NSNull)
        #expect((object["account"] as? [String: Any])?["userId"] is NSNull)
        #expect(out.contains("\"pauseReason\" : null"))
    }

    @Test func statusWithoutJSONIsTheHumanScreen() {
        let s = DaemonStatus(state: .starting)
        let now = Date()
        #expect(StatusCommand.render(s, json: false, color: false, now: now) == StatusRenderer.human(s, color: false, now: now))
    }

    func item(_ path: String, _ state: String, size: Int64, error: String? = nil) -> QueueListing.Item {
        .init(path: path, state: state, size: size, md5: nil, attempts: error == nil ? 0 : 3, lastError: error, updatedAt: nil)
    }

    @Test func queueListsOneLineAFileWithWhy() {
        let listing = QueueListing(items: [item("/srv/photos/a.jpg", "uploading", size: 4_200_000),
                                           item("/srv/photos/b.heic", "failed", size: 512, error: "unreadable: permission denied")],
                                   total: 5)
        let out = QueueCommand.render(listing, failedOnly: false, json: false)
        #expect(out == """
            uploading 4.2 MB    /srv/photos/a.jpg
            failed    512 B     /srv/photos/b.heic — unreadable: permission denied
            … 3 more (--limit)

            """)
    }

    @Test func anEmptyQueueSaysSo() {
        let empty = QueueListing(items: [], total: 0)
        #expect(QueueCommand.render(empty, failedOnly: false, json: false) == "Nothing waiting: every file is backed up.\n")
        #expect(QueueCommand.render(empty, failedOnly: true, json: false) == "No failed files.\n")
    }

    @Test func queueJSONIsTheListing() throws {
        let listing = QueueListing(items: [item("/srv/photos/a.jpg", "pending", size: 1)], total: 1)
        let out = QueueCommand.render(listing, failedOnly: false, json: true)
        #expect(try JSONDecoder().decode(QueueListing.self, from: Data(out.utf8)) == listing)
    }
}
