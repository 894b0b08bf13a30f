/// Where one file (a path) stands. `queued` means hashed and waiting for its object's
/// upload; the CLI shows it as `pending`, as cli.md defines that word.
package enum FileState: String, Sendable, Codable, CaseIterable {
    case pending, queued, uploading, uploaded, failed, gone

    /// The word of shared/spec/cli.md for this state.
    package var publicName: String {
        switch self {
        case .queued: "pending"
        default: rawValue
        }
    }
}

/// Where one object (a content, keyed by MD5) stands.
package enum ObjectState: String, Sendable, Codable {
    case pending, uploading, uploaded, failed
}
