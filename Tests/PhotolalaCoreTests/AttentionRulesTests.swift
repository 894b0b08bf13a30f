import Foundation
import Testing
import PhotolalaCore

/// The one list behind "Action needed" and the notifications, from plain status values.
@Suite struct AttentionRulesTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let rules = AttentionRules()

    func running() -> DaemonStatus {
        var s = DaemonStatus(state: .running)
        s.account = .init(signedIn: true, userId: "550E8400-E29B-41D4-A716-446655440000")
        return s
    }

    func reasons(_ s: DaemonStatus, _ facts: AttentionRules.Facts = .init()) -> [AttentionItem.Reason] {
        rules.items(for: s, facts: facts, now: now).map(\.reason)
    }

    @Test func aHealthyDaemonNeedsNothing() {
        #expect(reasons(running()).isEmpty)
    }

    @Test func notSignedInCountsOnlyOnANASThatWasSignedInBefore() {
        let s = DaemonStatus(state: .needsLogin)
        #expect(reasons(s).isEmpty, "a fresh install waiting for its first login is not a problem")
        let items = rules.items(for: s, facts: .init(signedInBefore: true), now: now)
        #expect(items.map(\.reason) == [.notSignedIn])
        #expect(items[0].severity == .critical && items[0].run == "sudo photolalactl login")
    }

    @Test(arguments: [
        (DaemonStatus.PauseReason.appleRevoked, AttentionItem.Reason.appleRevoked),
        (.appleNotFound, .appleNotFound), (.appleTransferred, .appleTransferred), (.quotaExceeded, .quotaExceeded),
        (.subscriptionRequired, .subscriptionRequired), (.accountRevoked, .accountRevoked),
    ])
    func eachAccountPauseIsItsOwnReason(pause: DaemonStatus.PauseReason, reason: AttentionItem.Reason) {
        var s = running()
        s.state = .paused
        s.pauseReason = pause
        let items = rules.items(for: s, facts: .init(), now: now)
        #expect(items.map(\.reason) == [reason])
        #expect(items[0].sentence.contains("photolalactl") || items[0].sentence.contains("Photolala app"))
    }

    @Test func theUsersOwnPauseAndTheTimetableNeedNobody() {
        for pause in [DaemonStatus.PauseReason.user, .schedule] {
            var s = running()
            s.state = .paused
            s.pauseReason = pause
            #expect(reasons(s).isEmpty, "\(pause)")
        }
    }

    @Test func eachMissingFolderIsItsOwnItem() {
        var s = running()
        s.watch.missingFolders = ["/srv/photos", "/mnt/usb"]
        let items = rules.items(for: s, facts: .init(), now: now)
        #expect(items.map(\.key) == ["folderMissing:/srv/photos", "folderMissing:/mnt/usb"])
        #expect(items.allSatisfy { $0.severity == .warning })
        #expect(items[0].message.contains("/srv/photos"))
    }

    @Test func theStateDirectoryFullOrUnwritable() {
        let full = rules.items(for: running(), facts: .init(databaseProblem: "disk full: the queue database (/var/lib/photolala/queue.db) cannot grow"), now: now)
        #expect(full.map(\.reason) == [.stateDirectoryFull])
        #expect(full[0].message.hasPrefix("Nothing new can be recorded (disk full): the queue database"))
        let readOnly = rules.items(for: running(), facts: .init(databaseProblem: "the queue database (/x/queue.db) is read-only: check its permissions"), now: now)
        #expect(readOnly.map(\.reason) == [.stateDirectoryUnwritable])
    }

    @Test func s3FailingCountsOnlyPastTheThreshold() {
        var s = running()
        s.s3 = .init(state: .backoff, failures: 12, since: Timestamp.string(now.addingTimeInterval(-1799)), lastError: "HTTP 503")
        #expect(reasons(s).isEmpty)
        #expect(rules.nextChange(for: s, now: now) == now.addingTimeInterval(1))
        s.s3?.since = Timestamp.string(now.addingTimeInterval(-1800 - 35 * 60))
        let items = rules.items(for: s, facts: .init(), now: now)
        #expect(items.map(\.reason) == [.s3Failing])
        #expect(items[0].message.contains("for 65 minutes") && items[0].message.contains("HTTP 503"))
        #expect(rules.nextChange(for: s, now: now) == nil)
        // The tests' knob.
        #expect(AttentionRules(environment: ["PHOTOLALAD_S3_FAILING_AFTER": "5s"]).s3FailingAfter == 5)
        #expect(AttentionRules(environment: [:]).s3FailingAfter == 1800)
    }

    @Test func aRefusedCertificateAnywhereIsNamedAtOnce() {
        var s = running()
        s.s3 = .init(state: .backoff, failures: 1, since: Timestamp.string(now), lastError:
            "PutObject: certificate for s3.home.lan is not trusted: it expired on 2026-11-01 00:00 UTC")
        let items = rules.items(for: s, facts: .init(), now: now)
        #expect(items.map(\.reason) == [.certificateRefused])
        #expect(items[0].message == "Certificate for s3.home.lan is not trusted: it expired on 2026-11-01 00:00 UTC")
        var backend = running()
        backend.credentials.lastError = "tls.ca_file /etc/photolala/ca.pem cannot be used (no such file): make it readable"
        #expect(reasons(backend) == [.certificateRefused])
        var other = running()
        other.credentials.lastError = "the backend refused: quota_exceeded"
        #expect(reasons(other).isEmpty)
    }

    @Test func severalAtOnceComeInOrder() {
        var s = running()
        s.state = .paused
        s.pauseReason = .appleRevoked
        s.watch.missingFolders = ["/srv/photos"]
        #expect(reasons(s, .init(databaseProblem: "disk full: x")) == [.appleRevoked, .stateDirectoryFull, .folderMissing])
    }

    /// web.md: an address the page cannot be served on is "Action needed" only when
    /// `[web] listen` was written; the default's failure is shown in `web` alone.
    @Test func theStatusPageNeedsTheUserOnlyWhenItsAddressWasSet() {
        var s = running()
        s.web = .init(listen: "127.0.0.1:8770", lastError: "cannot listen on 127.0.0.1:8770: the port is in use", listenSet: false)
        #expect(reasons(s).isEmpty)
        s.web?.listenSet = true
        #expect(reasons(s) == [.webUnavailable])
        #expect(rules.items(for: s, facts: .init(), now: now)[0].message.contains("127.0.0.1:8770"))
        s.web?.lastError = nil
        #expect(reasons(s).isEmpty)
    }

    @Test func itemsRoundTripInTheStatusJSON() throws {
        var s = running()
        s.attention = rules.items(for: DaemonStatus(state: .needsLogin), facts: .init(signedInBefore: true), now: now)
        let data = try JSONEncoder().encode(s)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let first = try #require((object["attention"] as? [[String: Any]])?.first)
        #expect(first["reason"] as? String == "notSignedIn" && first["severity"] as? String == "critical")
        #expect(first["subject"] is NSNull)
        #expect(try JSONDecoder().decode(DaemonStatus.self, from: data) == s)
    }
}
