/// What the inventory knows of one key.
package enum InventoryPresence: Sendable, Equatable {
    /// Listed (or uploaded by this daemon) with this size and ETag.
    case present(InventoryEntry)
    /// A complete listing of its prefix did not have it, and nothing since put it there
    /// as far as this daemon knows.
    case absent
    /// No complete listing of its prefix: ask S3 (HEAD) if it matters.
    case unknown
}
