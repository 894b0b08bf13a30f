import ArgumentParser
import Control
import Foundation
import PhotolalaCore
import RestoreCtl

/// `photolalactl audit [--since TIME] [--limit N] [--json] | --verify`: who did what, from
/// the daemon's trail (root and the daemon's user only), newest last; `--verify` checks the
/// chain and names the first record that does not fit (exit 1).
struct AuditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Who did what: the daemon's audit trail (root and the daemon's user only).",
        discussion: """
            Sign-ins, sign-outs, pauses, restores, refused calls and the other events photolalad records, \
            one a line: time, who, what, outcome, details. Each record carries the SHA-256 of the one before \
            it; --verify checks the whole chain and names the first record that was edited, inserted, \
            removed, reordered or cut.
            """)
    @OptionGroup(title: "Global options") var options: CtlOptions
    @Option(name: .long, help: ArgumentHelp("Only records from this time on (ISO 8601, e.g. 2026-11-22T07:00:00Z) or this date (2026-11-22, local).",
                                            valueName: "time|date"))
    var since: String?
    @Option(name: .long, help: "At most this many records (the newest).") var limit = AuditListing.defaultLimit
    @Flag(name: .long, help: "One JSON object {\"records\": [...]} (with --verify: the verdict).") var json = false
    @Flag(name: .long, help: "Check the chain: exit 0 if it is whole, 1 naming the first record that does not fit.") var verify = false

    func validate() throws {
        guard (1...AuditListing.maxLimit).contains(limit) else { throw ValidationError("--limit takes 1 to \(AuditListing.maxLimit)") }
        if let since, Self.sinceMillis(since) == nil {
            throw ValidationError("--since takes an ISO 8601 time (2026-11-22T07:00:00Z, or local without a zone) or a date (2026-11-22), not '\(since)'")
        }
        if verify && (since != nil || limit != AuditListing.defaultLimit) {
            throw ValidationError("--verify checks the whole trail: it takes neither --since nor --limit")
        }
    }

    func run() throws {
        let client = options.client()
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

    /// A date means from its start (local time); a time is taken as AsOfTime reads it.
    static func sinceMillis(_ text: String) -> Int64? {
        let t = text.trimmingCharacters(in: .whitespaces)
        return AsOfTime.parse(t.count == 10 ? t + "T00:00" : t)
    }

    static func render(_ listing: AuditListing, json: Bool, timeZone: TimeZone = .current) -> String {
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

    static func render(_ v: AuditVerification, json: Bool) -> String {
        if json {
            return String(decoding: (try? ControlJSON.encode(v, pretty: true)) ?? [], as: UTF8.self) + "\n"
        }
        if let problem = v.problem {
            return "The audit trail is broken: \(problem.message).\n"
        }
        guard let first = v.firstSeq, let last = v.lastSeq else { return "The audit trail is empty: nothing was recorded yet.\n" }
        return "The audit trail is whole: \(v.records) record\(v.records == 1 ? "" : "s") (\(first)–\(last)) in \(v.files.joined(separator: ", ")), each following the one before it.\n"
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
    static func summary(_ details: AuditDetails) -> String {
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
