import PhotolalaCore

/// What `photolalactl restore --by-date --json` prints at the end (the same counts as a
/// restore's, plus what only an export has: the keys left alone, where the dates came
/// from, the catalog), and the human form of it.
package struct ExportSummary: Codable, Sendable, Equatable {
    package struct Catalog: Codable, Sendable, Equatable {
        /// `read`, `none` (the account has no catalog) or `unreadable` (`message` says why).
        package var state: String
        package var rows: Int?
        package var malformed: Int?
        package var message: String?
    }

    /// How many files are dated by the catalog, by the object's own time, and by neither (1970).
    package struct Dated: Codable, Sendable, Equatable {
        package var catalog = 0
        package var object = 0
        package var none = 0
    }

    package struct Item: Codable, Sendable, Equatable {
        package var path: String
        package var size: Int64
        package var md5: String
        /// `restore`, `alreadyThere`, `keep`, `waitArchived`.
        package var action: String
        package var storageClass: String
        /// `catalog`, `object` or `none`.
        package var dated: String
    }

    package var byDate = true
    package var to: String
    package var dryRun: Bool
    package var catalog: Catalog
    /// Photo objects (`{md5}.dat`) in the bucket: the files the export writes.
    package var files = 0
    package var bytes: Int64 = 0
    package var restored = 0
    package var alreadyThere = 0
    package var kept = 0
    package var failed = 0
    /// Keys under `photos/{userId}/` that are not a photo's object, or could not be asked
    /// what they are: not written.
    package var skipped = 0
    package var waitingArchived = 0
    /// Objects not read at all: a manifest this NAS can open records another size for
    /// their MD5 than the bucket's (privacy.md "No side doors").
    package var refused = 0
    /// Of the files to write (a real run): how many are checked by the SHA-256 a manifest
    /// of the account records as well as their MD5, and how many by their MD5 alone (no
    /// manifest this NAS can open records one; all of them on a NAS without the key).
    package var checkedBySHA256: Int?
    package var checkedByMD5Alone: Int?
    /// Readable devices whose manifest could not be read whole for this.
    package var manifestsUnread: [String]?
    package var dated = Dated()
    package var problems: [RestoreSummary.Problem] = []
    package var items: [Item]?
    package var interrupted = false

    package init(to: String, dryRun: Bool, catalog: Catalog) {
        self.to = to
        self.dryRun = dryRun
        self.catalog = catalog
        items = dryRun ? [] : nil
    }

    /// cli.md: 0 when every object was written or already there (for a dry run: would be),
    /// 1 otherwise — a key left alone included, since its bytes did not come back.
    package var exitCode: Int32 {
        if dryRun { return kept == 0 && failed == 0 && skipped == 0 ? 0 : 1 }
        let whole = kept == 0 && failed == 0 && skipped == 0 && refused == 0 && waitingArchived == 0 && !interrupted
            && restored + alreadyThere == files
        return whole ? 0 : 1
    }

    /// The human form: one line per problem, then the counts.
    package var text: String {
        var out: [String] = []
        if !problems.isEmpty {
            out.append("Problems:")
            for p in problems { out.append("  \(p.kind.padding(toLength: 8, withPad: " ", startingAt: 0)) \(p.message)") }
        }
        switch catalog.state {
        case "unreadable": out.append("The apps' catalog could not be used (\(catalog.message ?? "")): every file is dated by its object's upload time.")
        case "none": out.append("This account has no catalog from the Photolala apps: every file is dated by its object's upload time.")
        default:
            if dated.object > 0 {
                out.append("\(dated.object) file\(dated.object == 1 ? " is" : "s are") not in the apps' catalog (videos, other formats) or dated outside 1970–2099 there: dated by the object's upload time.")
            }
        }
        if dated.none > 0 {
            out.append("\(dated.none) file\(dated.none == 1 ? " has" : "s have") no usable date at all: named 1970-01-01.")
        }
        if dryRun {
            let would = files - alreadyThere - kept - failed
            var line = "Dry run: \(would) file\(would == 1 ? "" : "s") would be exported into \(to), \(alreadyThere) already there, \(kept) kept"
            if skipped > 0 { line += ", \(skipped) key\(skipped == 1 ? "" : "s") in the bucket left alone" }
            if waitingArchived > 0 {
                line += "; \(waitingArchived) object\(waitingArchived == 1 ? "" : "s") wait in an archive class and would be asked back first"
            }
            out.append(line + ". Nothing was written.")
        } else {
            if let byMD5 = checkedByMD5Alone, let bySHA = checkedBySHA256 {
                var line = "\(byMD5) photo\(byMD5 == 1 ? " was" : "s were") checked by MD5 alone (no manifest this NAS can open records \(byMD5 == 1 ? "its" : "their") SHA-256), "
                    + "\(bySHA) by SHA-256 as well"
                if let unread = manifestsUnread { line += "; the manifest\(unread.count == 1 ? "" : "s") of \(unread.joined(separator: ", ")) could not be read whole" }
                out.append(line + ".")
            }
            var line = "Exported \(restored) file\(restored == 1 ? "" : "s") of \(files) into \(to), \(alreadyThere) already there, \(kept) kept, \(failed) failed"
            if refused > 0 { line += ", \(refused) refused (another size than a manifest records)" }
            if skipped > 0 { line += ", \(skipped) key\(skipped == 1 ? "" : "s") in the bucket left alone" }
            if waitingArchived > 0 { line += ", \(waitingArchived) still waiting in an archive class (run the command again later)" }
            if interrupted { line += "; interrupted: run the same command again to resume" }
            out.append(line + ".")
        }
        return out.joined(separator: "\n") + "\n"
    }
}
