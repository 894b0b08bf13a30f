import Foundation
import PhotolalaCore
import Testing
import Notify

/// The event object and the three webhook formats, and that no secret ever rides along.
@Suite struct NotifyEventTests {
    let at = Date(timeIntervalSince1970: 1_800_000_000)
    let userId = "550E8400-E29B-41D4-A716-446655440000"

    var status: DaemonStatus {
        var s = DaemonStatus(state: .paused)
        s.pauseReason = .appleRevoked
        s.account = .init(signedIn: true, userId: userId)
        s.queue.pending = 10
        s.queue.hashing = 1
        s.queue.uploading = 1
        s.queue.uploaded = 58113
        return s
    }

    var revoked: AttentionItem { AttentionRules.pauseItem(.appleRevoked)! }

    var event: NotifyEvent {
        NotifyEvent.problem(revoked, device: "nas-livingroom", at: at, status: NotifyEvent.Brief(status))
    }

    @Test func theJSONEventIsConfigMdsObject() throws {
        let body = WebhookMessage.make(event, format: .json)
        #expect(body.headers == [.init(name: "Content-Type", value: "application/json")])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(body.body)) as? [String: Any])
        #expect(Set(object.keys) == ["event", "reason", "severity", "title", "message", "device", "at", "status"])
        #expect(object["event"] as? String == "problem")
        #expect(object["reason"] as? String == "appleRevoked")
        #expect(object["severity"] as? String == "critical")
        #expect(object["title"] as? String == "Photolala backup paused on nas-livingroom")
        #expect(object["device"] as? String == "nas-livingroom")
        #expect(object["at"] as? String == "2027-01-15T08:00:00Z")
        let brief = try #require(object["status"] as? [String: Any])
        #expect(brief["state"] as? String == "paused" && brief["pending"] as? Int == 12 && brief["uploaded"] as? Int == 58113)
        let message = try #require(object["message"] as? String)
        #expect(message.contains("no longer authorizes") && message.hasSuffix("Sign in again: sudo photolalactl login"))
    }

    @Test func ntfyIsATextBodyWithHeaders() {
        let m = WebhookMessage.make(event, format: .ntfy)
        #expect(String(decoding: m.body, as: UTF8.self) == event.message)
        #expect(m.headers.contains(.init(name: "Title", value: "Photolala backup paused on nas-livingroom")))
        #expect(m.headers.contains(.init(name: "Priority", value: "4")))
        #expect(m.headers.contains(.init(name: "Tags", value: "rotating_light,photolala,appleRevoked")))
        let recovered = NotifyEvent.recovered(.appleRevoked, subject: nil, device: "nas", at: at, status: .init(status))
        let r = WebhookMessage.make(recovered, format: .ntfy)
        #expect(r.headers.contains(.init(name: "Priority", value: "3")))
        #expect(r.headers.contains(.init(name: "Tags", value: "white_check_mark,photolala,appleRevoked")))
    }

    @Test func ntfyHeadersStayOnOneASCIILine() {
        #expect(WebhookMessage.headerValue("Photolala backup paused on nas") == "Photolala backup paused on nas")
        #expect(WebhookMessage.headerValue("a\r\nInjected: 1") == "a  Injected: 1")
        let encoded = WebhookMessage.headerValue("Photolala backup paused on Zoë's NAS")
        #expect(encoded.hasPrefix("=?UTF-8?B?") && encoded.hasSuffix("?="))
        let inner = encoded.dropFirst(10).dropLast(2)
        #expect(String(decoding: Data(base64Encoded: String(inner))!, as: UTF8.self) == "Photolala backup paused on Zoë's NAS")
    }

    @Test func slackIsOneTextField() throws {
        let m = WebhookMessage.make(event, format: .slack)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(m.body)) as? [String: String])
        #expect(object == ["text": "*Photolala backup paused on nas-livingroom*\n\(event.message)"])
    }

    @Test func everyReasonHasATitleAndARecovery() {
        for reason in AttentionItem.Reason.allCases {
            #expect(NotifyEvent.problemTitle(reason, device: "nas").hasSuffix("nas"))
            #expect(!NotifyEvent.recoveredMessage(reason, subject: "/srv").isEmpty)
        }
    }

    @Test func noTokenKeyOrUserIdLeavesInAnEvent() throws {
        let token = "eyJhbGciOiJSUzI1NiJ9.secret-access-token-\(UUID().uuidString)"
        SecretRedactor.shared.register(token)
        // A message that quoted an S3 key (the user id) and a token, as a careless error might.
        let item = AttentionItem(reason: .s3Failing, severity: .critical,
                                 message: "S3 has been failing: PUT photos/\(userId)/abc.dat answered 403 for \(token)")
        let raw = NotifyEvent.problem(item, device: "nas", at: at, status: .init(status))
        let clean = NotifyScrubber(userIds: [userId]).scrub(raw)
        for format in [Settings.Notify.WebhookFormat.json, .ntfy, .slack] {
            let m = WebhookMessage.make(clean, format: format)
            let text = String(decoding: m.body, as: UTF8.self) + m.headers.map(\.value).joined()
            #expect(!text.contains(token) && !text.lowercased().contains(userId.lowercased()), "\(format)")
            #expect(text.contains("photos/{user}/abc.dat"), "\(format)")
        }
        let env = CommandSender.environment(clean, inherited: ["SECRET": token, "PHOTOLALA_TOKEN": token, "HOME": "/var/lib/photolala"])
        #expect(!env.values.contains { $0.contains(token) || $0.contains(userId) })
        #expect(Set(env.keys) == ["PATH", "HOME", "LANG", "PHOTOLALA_EVENT", "PHOTOLALA_TITLE", "PHOTOLALA_MESSAGE",
                                  "PHOTOLALA_SEVERITY", "PHOTOLALA_REASON", "PHOTOLALA_DEVICE", "PHOTOLALA_AT", "PHOTOLALA_JSON"])
    }

    @Test func theSummarySaysWhatTheDayBackedUp() {
        var s = status
        s.queue.pendingBytes = 2_000_000
        s.catalog = .init(state: .published, rows: 58001)
        let e = NotifyEvent.summary(DaySummary(files: 123, bytes: 4_500_000_000), device: "nas", at: at, status: s)
        #expect(e.event == .summary && e.reason == nil && e.severity == .info)
        #expect(e.message.hasPrefix("Today 123 files (4.5 GB) backed up; 58113 in all. 12 waiting (2.0 MB)."))
        #expect(e.message.contains("The Photolala apps show 58001 photos from this NAS."))
    }
}
