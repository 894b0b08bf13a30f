import ArgumentParser
import Control
import Foundation
import PhotolalaCore
import RestoreCtl

/// `photolalactl restore`: brings files back from the cloud with their paths, names,
/// modification times, owners and modes (cli.md, privacy.md). The daemon reads the
/// bucket; this command writes the files, with the rights of whoever runs it.
package struct RestoreCommand: AsyncParsableCommand {
    package init() {}
    package static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Bring files back from the cloud, with their paths, names, modification times, owners and modes.",
        discussion: """
            Restores the files the manifest of --device (default: this NAS) lists as present at --as-of \
            (default: now), limited to the PATHs given. Without --to, at their original paths, and only \
            into the folders this NAS watches; with --to DIR, under DIR/<watched folder's last name>/. \
            No symbolic link below those folders is followed. A file already there with the same bytes \
            is skipped, so running it again resumes; a different file there is kept and reported unless \
            --overwrite. Run as root, files and folders get back their owners (by name when it exists \
            here, else by number) and modes; as anyone else, their modes. Exit 0 if every file was \
            restored or already there, 1 otherwise. Restoring needs root or the daemon's user; members \
            of the socket's group may use --dry-run.
            """)
    @OptionGroup(title: "Global options") var options: CtlOptions
    @Option(name: .long, help: ArgumentHelp("The device to restore from: its name or id (photolalactl devices).", valueName: "name|id"))
    var device: String?
    @Option(name: .customLong("as-of"), help: ArgumentHelp("As the folders were at this time (ISO 8601, e.g. 2026-11-22T07:00:00Z) or at the end of this date (2026-11-22).", valueName: "time|date"))
    var asOf: String?
    @Option(name: .long, help: ArgumentHelp("Restore under DIR/<watched folder's last name>/ instead of the original folders.", valueName: "dir"))
    package var to: String?
    @Flag(name: .long, help: "Replace a different file found at a file's place.") var overwrite = false
    @Flag(name: .customLong("dry-run"), help: "List what would be restored; write nothing.") package var dryRun = false
    @Flag(name: .long, help: "One JSON object at the end (counts, problems; with --dry-run every file).") package var json = false
    @Flag(name: .customLong("numeric-owner"), help: "As root: give owners and groups back by their recorded numbers, never by name.")
    package var numericOwner = false
    @Flag(name: .customLong("no-owners"), help: "Keep the restoring user as the owner of what is restored (modes are still given back).")
    package var noOwners = false
    @Flag(name: .customLong("allow-unencrypted"), help: "With --to: restore from a device whose manifest is still in the old plaintext format, which nothing authenticates (every restore rule still applies; never for a device encrypted before).")
    var allowUnencrypted = false
    @Argument(help: ArgumentHelp("Files or folders to restore, as they were named on that device.", valueName: "path"))
    var paths: [String] = []
    @Flag(name: .customLong("by-date"), help: "Every photo and video of the account, from the bucket alone (no manifest, no recovery key), into --to DIR as YYYY/MM/YYYY-MM-DD HH.MM.SS <md5>.<ext>.")
    package var byDate = false

    package func validate() throws {
        if byDate { try ByDateExport.validate(self) }
        if let asOf, AsOfTime.parse(asOf) == nil {
            throw ValidationError("--as-of takes an ISO 8601 time (2026-11-22T07:00:00Z, or local without a zone) or a date (2026-11-22), not '\(asOf)'")
        }
        if let to, to.isEmpty { throw ValidationError("--to needs a folder") }
        // privacy.md "No side doors": what nothing authenticates never goes back into the
        // watched folders (an attacker's .ssh/authorized_keys); a dry run writes nothing.
        if allowUnencrypted && to == nil && !dryRun {
            throw ValidationError("--allow-unencrypted needs --to DIR: a plaintext manifest, which nothing authenticates, is never restored into the original folders")
        }
        if numericOwner && noOwners { throw ValidationError("--numeric-owner and --no-owners cannot go together: pick how owners come back, or that they do not") }
    }

    package func run() async throws {
        let interrupt = InterruptFlag()
        let flag = interrupt.shared
        if byDate, let to { return try await ByDateExport.run(options: options, to: to, dryRun: dryRun, json: json, interrupt: interrupt) }
        let request = RestoreRun.Request(device: device, asOf: asOf.flatMap { AsOfTime.parse($0) }, asOfText: asOf, to: to, paths: paths,
                                         overwrite: overwrite, dryRun: dryRun, json: json,
                                         owners: noOwners ? .keep : numericOwner ? .numeric : .byName, allowUnencrypted: allowUnencrypted)
        let summary: RestoreSummary
        do {
            summary = try await RestoreRun(client: options.client(), request: request, interrupted: { flag.value }).run()
        } catch {
            switch error {
            case .control(let failure): throw CtlFailure.exit(failure)
            case .plan(let why):
                StandardError.print("photolalactl: \(why)")
                throw ExitCode(1)
            }
        }
        print(Self.render(summary, json: json), terminator: "")
        withExtendedLifetime(interrupt) {}
        if summary.exitCode != 0 { throw ExitCode(summary.exitCode) }
    }

    static func render(_ s: RestoreSummary, json: Bool) -> String {
        if json {
            return String(decoding: (try? ControlJSON.encode(s, pretty: true)) ?? [], as: UTF8.self) + "\n"
        }
        var out: [String] = []
        if !s.problems.isEmpty {
            out.append("Problems:")
            for p in s.problems { out.append("  \(p.kind.padding(toLength: 8, withPad: " ", startingAt: 0)) \(p.message)") }
        }
        if s.dryRun {
            let would = s.files - s.alreadyThere - s.kept - s.failed
            var line = "Dry run: \(would) file\(would == 1 ? "" : "s") would be restored, \(s.alreadyThere) already there, \(s.kept) kept, \(s.failed) missing"
            if s.waitingArchived > 0 { line += "; \(s.waitingArchived) object\(s.waitingArchived == 1 ? "" : "s") wait in an archive class and would be asked back first" }
            out.append(line + ". Nothing was written.")
        } else {
            var line = "Restored \(s.restored) file\(s.restored == 1 ? "" : "s") of \(s.files), \(s.alreadyThere) already there, \(s.kept) kept, \(s.failed) failed"
            if s.waitingArchived > 0 { line += ", \(s.waitingArchived) still waiting in an archive class (run the command again later)" }
            if s.interrupted { line += "; interrupted: run the same command again to resume" }
            out.append(line + ".")
        }
        return out.joined(separator: "\n") + "\n"
    }
}
