/// How a sync ended.
package enum SyncOutcome: Sendable, Equatable {
    /// The pointer is as last seen and nothing was waiting: nothing was downloaded.
    case unchanged
    /// The catalog was read and already lists every row of ours it should.
    case current(SyncReport)
    /// A new snapshot and the pointer to it went up.
    case published(SyncReport)
    /// The catalog cannot be read: nothing was published over it (the reason, for status).
    case blocked(String)
    /// Someone published between our read and our write this many times in a row.
    case contended(rounds: Int)
}
