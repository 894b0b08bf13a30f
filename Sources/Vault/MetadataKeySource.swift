import PhotolalaCore

/// Where the manifest stage and restore get the account's metadata key, without importing
/// the service that keeps it (privacy.md "The account key and the recovery key").
package protocol MetadataKeySource: Sendable {
    /// What this NAS can do with `metadata/{userId}/` now.
    func metadataKeyState() async -> MetadataKeyState
    /// Says when the state may have changed (signed in or out, a key entered, made or
    /// rotated): the manifest waits on it while the key is `needed`.
    var keyChanges: ChangeFeed { get }
    /// `metadataKeyState`, after a cheap look (a HEAD) at whether the bucket's key object
    /// changed since it was last looked at whole; a changed one is looked at whole first. The
    /// manifest asks before it writes, so a new account key or a substitution made elsewhere
    /// stops it before it seals anything more under a key that no longer serves.
    func currentKeyState() async -> MetadataKeyState
    /// What a device record wraps the account key under: this NAS's recovery key while it
    /// is the current one (nil: none, or outdated; the record then carries no wrap).
    func recordWrap() async -> SealedRecord.Wrap?
}

extension MetadataKeySource {
    package func currentKeyState() async -> MetadataKeyState { await metadataKeyState() }
    package func recordWrap() async -> SealedRecord.Wrap? { nil }
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
