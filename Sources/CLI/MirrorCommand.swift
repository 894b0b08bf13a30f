import ArgumentParser
import Control
import Foundation
import PhotolalaCore

/// `photolalactl mirror [--json] [--limit N] | --pass | --refill` (cli.md, mirror.md): the
/// NAS's copy of the account, what it waits for, and the two things one may ask of it.
struct MirrorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mirror", abstract: "The NAS's own copy of every photo of the account (mirror.md).",
        discussion: "Without an option: the mirror's state, then the objects coming, archived, refused and only on this NAS. "
            + "--pass looks at the account now (its catalog and a full listing); --refill fetches again the copies removed here "
            + "(root or the daemon's user).")
    @OptionGroup(title: "Global options") var options: CtlOptions
    @Flag(name: .long, help: "One JSON object: {\"mirror\": {...}, \"pending\": [...], \"archived\": [...], \"refused\": [...], \"onlyHere\": [...]}.")
    var json = false
    @Option(name: .long, help: "At most this many objects in each list.") var limit = MirrorListing.defaultLimit
    @Flag(name: .long, help: "Start a pass now, with a full listing of the account.") var pass = false
    @Flag(name: .long, help: "Fetch again every copy removed here (renamed, moved out or deleted).") var refill = false

    func validate() throws {
        guard limit > 0 else { throw ValidationError("--limit must be at least 1") }
        guard !(pass && refill) else { throw ValidationError("--pass and --refill are two commands: run one, then the other") }
        guard !((pass || refill) && json) else { throw ValidationError("--json goes with the listing, not with --pass or --refill") }
    }

    func run() throws {
        if pass { return try CtlFailure.command(options, .mirrorPass) }
        if refill { return try CtlFailure.command(options, .mirrorRefill) }
        let listing: MirrorListing
        do {
            listing = try options.client().call(.mirror, query: ["limit": "\(limit)"], as: MirrorListing.self)
        } catch {
            throw CtlFailure.exit(error)
        }
        print(Self.render(listing, json: json), terminator: "")
    }

    static func render(_ l: MirrorListing, json: Bool) -> String {
        if json {
            return String(decoding: (try? ControlJSON.encode(l, pretty: true)) ?? [], as: UTF8.self) + "\n"
        }
        let m = l.mirror
        guard m.state != .off else {
            return "The mirror is off: set [mirror] folder in photolalad.toml (mirror.md), then reload photolalad.\n"
        }
        var out = [StatusRenderer.mirrorLine(m) ?? ""]
        out.append("Folder     \(m.folder ?? "?")")
        var counts = "           \(m.copied) copied, \(m.adopted) adopted, \(m.inAccount) objects in the account"
        if m.trashed > 0 { counts += ", \(m.trashed) moved to .trash/" }
        out.append(counts)
        if let at = m.lastPassAt { out.append("Last pass  \(at)" + (m.nextCheckAt.map { ", next look \($0)" } ?? "")) }
        if let e = m.lastError { out.append("Last error \(e)") }
        func section(_ title: String, _ items: [MirrorListing.Item], _ total: Int) {
            guard !items.isEmpty else { return }
            out.append("")
            out.append("\(title) (\(total)):")
            for i in items {
                var line = "  \(i.md5)  \(Units.humanBytes(i.size).padding(toLength: 9, withPad: " ", startingAt: 0))"
                if let p = i.path { line += " \(p)" } else if let d = i.date { line += " \(d)" }
                if let c = i.storageClass, c != "STANDARD" { line += " [\(c)]" }
                if i.refusals > 0 { line += " refused \(i.refusals)×" }
                if let e = i.lastError { line += " — \(e)" }
                out.append(line)
            }
            if total > items.count { out.append("  … \(total - items.count) more (--limit)") }
        }
        section("Coming", l.pending, m.pending)
        section("In an archive class", l.archived, m.archived)
        section("Refused", l.refused, m.refused)
        section("Only on this NAS", l.onlyHere, m.onlyHere)
        return out.joined(separator: "\n") + "\n"
    }
}
