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

/// What one sync found and did.
package struct SyncReport: Sendable, Equatable {
    /// The pointer as the sync left it; nil when the user has no catalog.
    package var pointer: SeenPointer?
    /// Our photos with a row in the catalog.
    package var rows: Int
    /// Rows in the catalog, from every device.
    package var total: Int
    package var added = 0
    /// Rows of ours an app removed together with the photo (not put back).
    package var withdrawn = 0
    /// Rows of ours an app's rewrite dropped while the photo stayed (put back).
    package var putBack = 0
    /// The snapshot this publish replaced when someone else (an app, another NAS) had
    /// published it since this NAS last read the catalog: its MD5. Their rows are kept
    /// (app-catalog.md step 3); the audit trail records that their catalog was replaced.
    package var replaced: String?
    /// Ready photos whose columns the apps could not read (not published).
    package var rejected = 0
    package var firstRejection: String?
    /// Where the time went, step by step.
    package var phases = ""

    package init(pointer: SeenPointer?, rows: Int, total: Int) {
        self.pointer = pointer
        self.rows = rows
        self.total = total
    }
}

/// The catalog's pointer as last seen: its ETag and the snapshot MD5 it names.
package struct SeenPointer: Sendable, Equatable {
    package var etag: String
    package var md5: String

    package init(etag: String, md5: String) {
        self.etag = etag
        self.md5 = md5
    }
}
