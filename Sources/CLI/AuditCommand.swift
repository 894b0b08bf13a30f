import ArgumentParser
import Audit
import Control
import Foundation
import PhotolalaCore
import RestoreCtl

/// `photolalactl audit [--since TIME] [--limit N] [--json] | --verify`: who did what, from
/// the daemon's trail (root and the daemon's user only), newest last; `--verify` checks the
/// chain and names the first record that does not fit (exit 1).
package struct AuditCommand: ParsableCommand {
    package init() {}
    package static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Who did what: the daemon's audit trail (root and the daemon's user only).",
        discussion: """
            Sign-ins, sign-outs, pauses, restores, refused calls and the other events photolalad records, \
            one a line: time, who, what, outcome, details. Each record carries the SHA-256 of the one before \
            it; --verify checks the whole chain and the trail's seals and names the first record that was edited, \
            inserted, removed, reordered or cut. Each batch of records is also sealed with a key that moves \
            forward and forgets the one before: --verification-key shows root, once, the key that checks every \
            seal (keep it off this NAS), and --verify --verification-key - reads it from standard input and proves \
            that nothing sealed was rewritten since, even by someone who became root later.
            """)
    @OptionGroup(title: "Global options") package var options: CtlOptions
    @Option(name: .long, help: ArgumentHelp("Only records from this time on (ISO 8601, e.g. 2026-11-22T07:00:00Z) or this date (2026-11-22, local).",
                                            valueName: "time|date"))
    package var since: String?
    @Option(name: .long, help: "At most this many records (the newest).") package var limit = AuditListing.defaultLimit
    @Flag(name: .long, help: "One JSON object {\"records\": [...]} (with --verify: the verdict).") package var json = false
    @Flag(name: .long, help: "Check the chain: exit 0 if it is whole, 1 naming the first record that does not fit.") package var verify = false
    @Flag(name: .customLong("verification-key"),
          help: "Alone: show (root only, once) the key that checks the trail's seals. With --verify: check them with it, read from standard input (-).")
    var verificationKey = false
    @Argument(help: ArgumentHelp("With --verify --verification-key: - to read the key from standard input.", valueName: "-"))
    var keySource: String?

    package func validate() throws {
        guard (1...AuditListing.maxLimit).contains(limit) else { throw ValidationError("--limit takes 1 to \(AuditListing.maxLimit)") }
        if let since, Self.sinceMillis(since) == nil {
            throw ValidationError("--since takes an ISO 8601 time (2026-11-22T07:00:00Z, or local without a zone) or a date (2026-11-22), not '\(since)'")
        }
        if verify && (since != nil || limit != AuditListing.defaultLimit) {
            throw ValidationError("--verify checks the whole trail: it takes neither --since nor --limit")
        }
        if verificationKey && !verify && (since != nil || limit != AuditListing.defaultLimit || keySource != nil) {
            throw ValidationError("--verification-key alone shows the key: it takes no other argument but --json")
        }
        if verify && verificationKey && keySource == nil {
            throw ValidationError("--verify --verification-key reads the key from standard input: give - after it (never the key itself: every user sees a command line)")
        }
        if keySource != nil && !verificationKey { throw ValidationError("unexpected argument '\(keySource!)'") }
    }

    package func run() throws {
        let client = options.client()
        if verificationKey && !verify {
            try showVerificationKey(client)
            return
        }
        if verify && verificationKey {
            try verifyWithKey(client)
            return
        }
        if verify {
            let verdict: AuditVerification
            do {
                verdict = try client.call(.auditVerify, as: AuditVerification.self)
            } catch {
                throw CtlFailure.exit(error)
            }
            print(Self.render(verdict, json: json), terminator: "")
            if !verdict.whole { throw ExitCode(1) }
            return
        }
        var query = ["limit": "\(limit)"]
        if let since, let millis = Self.sinceMillis(since) { query["since"] = "\(millis)" }
        let listing: AuditListing
        do {
            listing = try client.call(.audit, query: query, as: AuditListing.self)
        } catch {
            throw CtlFailure.exit(error)
        }
        print(Self.render(listing, json: json), terminator: "")
    }

    /// `audit --verification-key`: printed once; the daemon forgets it once told it was.
    private func showVerificationKey(_ client: ControlClient) throws {
        let (status, body): (Int, [UInt8])
        do {
            (status, body) = try client.send(.auditVerificationKey)
        } catch {
            throw CtlFailure.exit(error)
        }
        let view = try RecoveryKeyCommand.answer(VerificationKeyView.self, status: status, body: body, client: client)
        print(Self.render(view, json: json), terminator: "")
        guard view.verificationKey != nil else { throw ExitCode(1) }
        fflush(nil)
        do {
            let (taken, reply) = try client.send(.auditVerificationKeyTaken,
                                                 body: try ControlJSON.encode(VerificationKeyTaken(fingerprint: view.fingerprint)))
            if !(200..<300).contains(taken) {
                let why = (try? ControlJSON.decode(ControlReply.self, from: reply))?.message ?? "HTTP \(taken)"
                StandardError.print("photolalactl: the daemon still keeps the verification key (\(why)): run the command again")
                throw ExitCode(1)
            }
        } catch let failure as ControlClient.Failure {
            StandardError.print("photolalactl: the daemon still keeps the verification key (\(failure)): run the command again")
            throw ExitCode(1)
        }
    }

    static func render(_ view: VerificationKeyView, json: Bool) -> String {
        if json {
            return String(decoding: (try? ControlJSON.encode(view, pretty: true)) ?? [], as: UTF8.self) + "\n"
        }
        guard let key = view.verificationKey else {
            return "The audit trail's verification key (fingerprint \(view.fingerprint), made \(view.createdAt)) was shown "
                + "\(view.shownAt.map { "on \($0)" } ?? "before") and photolalad keeps no copy of it: use the one you kept.\n"
        }
        return [
            "Verification key:  \(key)",
            "Fingerprint:       \(view.fingerprint)",
            "Made:              \(view.createdAt)",
            "",
            "This is shown once: photolalad forgets it now. Keep it somewhere other than this NAS. With it,",
            "`sudo photolalactl audit --verify --verification-key -` proves that no record sealed before now was",
            "changed, removed or added later, even by someone who becomes root on this NAS.",
        ].joined(separator: "\n") + "\n"
    }

    /// `audit --verify --verification-key -`: the daemon sends the trail, its seals and its
    /// key file's state; the check runs here, with the key, which never leaves this process.
    private func verifyWithKey(_ client: ControlClient) throws {
        let text: String?
        if keySource == "-" {
            text = SecretInput.line(asking: "the audit trail's verification key (8 groups of 8 characters)")
        } else {
            StandardError.print("photolalactl: warning: a verification key on the command line is visible to every user of this NAS (ps, shell history); give - and type or pipe it instead")
            text = keySource
        }
        guard let text else {
            StandardError.print("photolalactl: standard input held no verification key (--verification-key - reads it from there, one line)")
            throw ExitCode(1)
        }
        let key: VerificationKey
        do {
            key = try VerificationKey.parse(text)
        } catch {
            StandardError.print("photolalactl: \(error)")
            throw ExitCode(1)
        }
        var reader = AuditMaterialReader(key: key)
        let answer: ControlClient.StreamAnswer
        do {
            answer = try client.stream(.auditSealed, timeout: 120) { bytes in try reader.feed(bytes) }
        } catch let failure as ControlClient.Failure {
            throw CtlFailure.exit(failure)
        } catch {
            StandardError.print("photolalactl: \(error)")
            throw ExitCode(1)
        }
        guard (200..<300).contains(answer.status) else {
            StandardError.print("photolalactl: \(answer.errorMessage ?? "unexpected answer from photolalad (HTTP \(answer.status))")")
            throw ExitCode(1)
        }
        guard answer.complete else {
            StandardError.print("photolalactl: the daemon's answer was cut short: nothing can be said of the trail; run it again")
            throw ExitCode(1)
        }
        let verdict: AuditVerification
        do {
            verdict = try reader.finish()
        } catch {
            StandardError.print("photolalactl: \(error)")
            throw ExitCode(1)
        }
        print(Self.render(verdict, json: json), terminator: "")
        if !verdict.whole { throw ExitCode(1) }
    }

    /// A date means from its start (local time); a time is taken as AsOfTime reads it.
    package static func sinceMillis(_ text: String) -> Int64? {
        let t = text.trimmingCharacters(in: .whitespaces)
        return AsOfTime.parse(t.count == 10 ? t + "T00:00" : t)
    }

    package static func render(_ listing: AuditListing, json: Bool, timeZone: TimeZone = .current) -> String {
        if json {
            return String(decoding: (try? ControlJSON.encode(listing, pretty: true)) ?? [], as: UTF8.self) + "\n"
        }
        if listing.records.isEmpty { return "No audit records.\n" }
        let clock = localClock(timeZone)
        let rows = listing.records.map { r in
            [Timestamp.parse(r.at).map(clock.string) ?? r.at, who(r.actor), r.event.rawValue, r.outcome.rawValue, summary(r.details)]
        }
        let widths = (0..<4).map { i in rows.map { $0[i].count }.max() ?? 0 }
        var lines: [String] = []
        if listing.more { lines.append("(older records left out: --limit or --since)") }
        for row in rows {
            let cells = row.enumerated().map { i, c in i < 4 ? c.padding(toLength: widths[i], withPad: " ", startingAt: 0) : c }
            lines.append(cells.joined(separator: "  ").trimmingCharacters(in: .whitespaces))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    package static func render(_ v: AuditVerification, json: Bool) -> String {
        if json {
            return String(decoding: (try? ControlJSON.encode(v, pretty: true)) ?? [], as: UTF8.self) + "\n"
        }
        if let problem = v.problem {
            return "The audit trail is broken: \(problem.message).\n"
        }
        guard let first = v.firstSeq, let last = v.lastSeq else {
            return "The audit trail is empty: nothing was recorded yet.\n" + sealed(v.sealing)
        }
        return "The audit trail is whole: \(v.records) record\(v.records == 1 ? "" : "s") (\(first)–\(last)) in \(v.files.joined(separator: ", ")), each following the one before it.\n"
            + sealed(v.sealing)
    }

    /// What the seals add to a whole trail.
    static func sealed(_ s: AuditVerification.Sealing?) -> String {
        guard let s, let last = s.lastEpoch, let through = s.sealedThrough else { return "" }
        var out = "Sealed through record \(through) (epoch \(last)\(s.sealedAt.map { ", \($0)" } ?? ""))"
        out += s.checkedWithKey
            ? ", every seal checked with the verification key (fingerprint \(s.fingerprint ?? "?")).\n"
            : "; the seals are in place (`--verification-key -` proves them).\n"
        if let before = s.unsealedBefore {
            out += "Records up to \(before) were written before the trail was first sealed: only the chain speaks for them.\n"
        }
        return out
    }

    static func who(_ actor: AuditActor) -> String {
        switch actor {
        case let .caller(uid, user): user.map { "\($0) (uid \(uid))" } ?? "uid \(uid)"
        case .daemon: "daemon"
        case .systemd: "systemd"
        }
    }

    /// `key=value`: what happened first (`method`, `step`), then the rest sorted; cut at
    /// 160 characters (a restore's destination still shows).
    package static func summary(_ details: AuditDetails) -> String {
        let first = ["method", "step"]
        let rest = details.values.keys.filter { !first.contains($0) }.sorted()
        let text = (first + rest).compactMap { key in details[key].map { "\(key)=\($0)" } }.joined(separator: " ")
        return text.count > 160 ? String(text.prefix(159)) + "…" : text
    }

    /// The NAS's local time, to the second: what a person compares with their clock.
    static func localClock(_ timeZone: TimeZone) -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = timeZone
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter
    }
}
