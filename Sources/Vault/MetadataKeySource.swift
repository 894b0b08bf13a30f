import PhotolalaCore

/// Where the manifest stage and restore get the account's metadata key, without importing
/// the service that keeps it (privacy.md "The account key and the recovery key").
package protocol MetadataKeySource: Sendable {
    /// What this NAS can do with `metadata/{userId}/` now.
    func metadataKeyState() async -> MetadataKeyState
    /// Says when the state may have changed (signed in or out, a key entered, made or
    /// rotated): the manifest waits on it while the key is `needed`.
    var keyChanges: ChangeFeed { get }
}

/// status `recovery.state` (cli.md), with the key itself when it is ready.
package enum MetadataKeyState: Sendable, Equatable {
    /// Not signed in.
    case none
    /// This NAS holds the account key: seal and open everything under `metadata/{userId}/`.
    case ready(AccountKey)
    /// The account already has a key this NAS does not hold: enter the recovery key.
    case needed
    /// Encrypted objects exist but the key object is missing or does not check out; the
    /// sentence says what to do. Never a reason to make a new key.
    case unreadable(String)

    package var name: String {
        switch self {
        case .none: "none"
        case .ready: "ready"
        case .needed: "needed"
        case .unreadable: "unreadable"
        }
    }
}
