/// What `photolalactl restore --json` prints at the end: the counts, every problem, and
/// for `--dry-run` every file with what would happen to it.
public struct RestoreSummary: Codable, Sendable, Equatable {
    public struct Device: Codable, Sendable, Equatable {
        public var id: String
        public var name: String?
    }

    public struct Problem: Codable, Sendable, Equatable {
        /// `kept`, `failed`, `missing`, `manifest`, `filter`.
        public var kind: String
        public var path: String?
        public var message: String
    }

    public struct Item: Codable, Sendable, Equatable {
        public var path: String
        public var size: Int64
        public var md5: String
        /// `restore`, `alreadyThere`, `keep`, `missing`, `waitArchived`.
        public var action: String
        public var storageClass: String?
    }

    public var device: Device
    public var asOf: String?
    public var dryRun: Bool
    public var files: Int
    public var bytes: Int64
    public var restored: Int
    public var alreadyThere: Int
    public var kept: Int
    public var failed: Int
    /// Objects in an archive class: waiting (dry run: to be asked back) when the run ended.
    public var waitingArchived: Int
    public var problems: [Problem]
    public var items: [Item]?
    public var interrupted: Bool

    /// cli.md: 0 when every file was restored or already there (for a dry run: would be), 1 otherwise.
    public var exitCode: Int32 {
        if dryRun { return kept == 0 && failed == 0 && problems.isEmpty ? 0 : 1 }
        return kept == 0 && failed == 0 && waitingArchived == 0 && problems.isEmpty && !interrupted && restored + alreadyThere == files ? 0 : 1
    }
}
