/// Where one file (a path) stands. `queued` means hashed and waiting for its object's
/// upload; the CLI shows it as `pending`, as cli.md defines that word.
public enum FileState: String, Sendable, Codable, CaseIterable {
    case pending, queued, uploading, uploaded, failed, gone

    /// The word of shared/spec/cli.md for this state.
    public var publicName: String {
        switch self {
        case .queued: "pending"
        default: rawValue
        }
    }
}

/// Where one object (a content, keyed by MD5) stands.
public enum ObjectState: String, Sendable, Codable {
    case pending, uploading, uploaded, failed
}
