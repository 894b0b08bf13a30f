/// What `photolalactl restore --json` prints at the end: the counts, every problem, and
/// for `--dry-run` every file with what would happen to it.
package struct RestoreSummary: Codable, Sendable, Equatable {
    package struct Device: Codable, Sendable, Equatable {
        package var id: String
        package var name: String?
    }

    package struct Problem: Codable, Sendable, Equatable {
        /// `kept`, `failed`, `missing`, `manifest`, `filter`.
        package var kind: String
        package var path: String?
        package var message: String
    }

    package struct Item: Codable, Sendable, Equatable {
        package var path: String
        package var size: Int64
        package var md5: String
        /// `restore`, `alreadyThere`, `keep`, `missing`, `waitArchived`.
        package var action: String
        package var storageClass: String?
    }

    package var device: Device
    package var asOf: String?
    package var dryRun: Bool
    package var files: Int
    package var bytes: Int64
    package var restored: Int
    package var alreadyThere: Int
    package var kept: Int
    package var failed: Int
    /// Objects in an archive class: waiting (dry run: to be asked back) when the run ended.
    package var waitingArchived: Int
    package var problems: [Problem]
    package var items: [Item]?
    package var interrupted: Bool

    /// cli.md: 0 when every file was restored or already there (for a dry run: would be), 1 otherwise.
    package var exitCode: Int32 {
        if dryRun { return kept == 0 && failed == 0 && problems.isEmpty ? 0 : 1 }
        return kept == 0 && failed == 0 && waitingArchived == 0 && problems.isEmpty && !interrupted && restored + alreadyThere == files ? 0 : 1
    }
}
