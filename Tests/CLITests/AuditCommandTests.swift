import ArgumentParser
import Control
import Foundation
import PhotolalaCore
import Testing
import CLI

/// `photolalactl audit`: its options, its one line a record, and the verdict of --verify.
@Suite struct AuditCommandTests {
    static let records = [
        AuditRecord(seq: 1, at: "2026-11-22T07:00:00.250Z", event: .pause, actor: .caller(uid: 0, user: "root"), outcome: .ok,
                    details: [:], prev: String(repeating: "0", count: 64)),
        AuditRecord(seq: 2, at: "2026-11-22T07:00:05.000Z", event: .controlRefused, actor: .caller(uid: 65534, user: nil), outcome: .refused,
                    details: ["call": "POST /v1/pause", "notRecordedBefore": 3], prev: String(repeating: "a", count: 64)),
        AuditRecord(seq: 3, at: "2026-11-22T07:01:00.000Z", event: .configReload, actor: .systemd, outcome: .failed,
                    details: ["error": .string(String(repeating: "e", count: 200))], prev: String(repeating: "b", count: 64)),
    ]

    @Test func optionsParse() throws {
        let audit = try #require(try Ctl.parseAsRoot(["audit", "--since", "2026-11-22", "--limit", "5", "--json"]) as? AuditCommand)
        #expect(audit.since == "2026-11-22" && audit.limit == 5 && audit.json && !audit.verify)
        #expect(try Ctl.parseAsRoot(["audit", "--verify"]) is AuditCommand)
    }

    @Test(arguments: [["audit", "--verify", "--limit", "5"], ["audit", "--since", "yesterday"], ["audit", "--limit", "0"],
                      ["audit", "--verify", "--since", "2026-11-22"]])
    func badCombinationsAreRefused(args: [String]) {
        #expect(throws: (any Error).self) { try Ctl.parseAsRoot(args) }
    }

    @Test func aDateMeansFromItsStart() {
        let date = AuditCommand.sinceMillis("2026-11-22")
        let time = AuditCommand.sinceMillis("2026-11-22T00:00")
        #expect(date != nil && date == time)
        #expect(AuditCommand.sinceMillis("2026-11-22T07:00:00Z") == 1_795_330_800_000)
    }

    @Test func oneLineARecordNewestLast() {
        let text = AuditCommand.render(AuditListing(records: Self.records, more: false), json: false, timeZone: TimeZone(identifier: "UTC")!)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines[0].hasPrefix("2026-11-22 07:00:00  root (uid 0)") && lines[0].contains("pause") && lines[0].contains("ok"))
        #expect(lines[1].contains("uid 65534") && lines[1].contains("control.refused") && lines[1].contains("refused")
                && lines[1].hasSuffix("call=POST /v1/pause notRecordedBefore=3"))
        #expect(lines[2].contains("systemd") && lines[2].contains("config.reload") && lines[2].hasSuffix("…"))
        // The columns line up.
        let events = zip(lines, ["pause", "control.refused", "config.reload"]).map { $0.range(of: $1)!.lowerBound.utf16Offset(in: $0) }
        #expect(Set(events).count == 1)
        // What happened comes first.
        #expect(AuditCommand.summary(["userId": "U", "step": "approved", "method": "pairing"]) == "method=pairing step=approved userId=U")
        let more = AuditCommand.render(AuditListing(records: Self.records, more: true), json: false)
        #expect(more.hasPrefix("(older records left out"))
        #expect(AuditCommand.render(AuditListing(records: [], more: false), json: false) == "No audit records.\n")
    }

    @Test func jsonIsTheListing() throws {
        let text = AuditCommand.render(AuditListing(records: Self.records, more: false), json: true)
        let back = try JSONDecoder().decode(AuditListing.self, from: Data(text.utf8))
        #expect(back.records == Self.records)
        let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any]
        let first = (object["records"] as! [[String: Any]])[0]
        #expect(Set(first.keys) == ["seq", "at", "event", "actor", "outcome", "details", "prev"])
        #expect((first["actor"] as! [String: Any])["user"] as? String == "root")
    }

    @Test func theVerdictInWords() throws {
        let whole = AuditVerification(records: 3, firstSeq: 1, lastSeq: 3, files: ["audit.log"], problem: nil)
        #expect(AuditCommand.render(whole, json: false) == "The audit trail is whole: 3 records (1–3) in audit.log, each following the one before it.\n")
        let broken = AuditVerification(records: 3, firstSeq: 1, lastSeq: 3, files: ["audit.log"],
                                       problem: .init(kind: .edited, seq: 2, file: "audit.log", line: 2, message: "record 2 (audit.log, line 2) was changed"))
        #expect(AuditCommand.render(broken, json: false) == "The audit trail is broken: record 2 (audit.log, line 2) was changed.\n")
        let json = try JSONSerialization.jsonObject(with: Data(AuditCommand.render(broken, json: true).utf8)) as! [String: Any]
        #expect(json["whole"] as? Bool == false)
        #expect(AuditCommand.render(AuditVerification(records: 0, firstSeq: nil, lastSeq: nil, files: [], problem: nil), json: false)
                .hasPrefix("The audit trail is empty"))
    }
}
