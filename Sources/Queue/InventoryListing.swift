import Foundation

/// Where the listing of one prefix (`photos/{userId}/`, `thumbnails/{userId}/`) stands.
/// The inventory stage writes it; the uploader (and the thumbnail stage) read it to know
/// whether "not listed" means "not there".
package struct InventoryListing: Sendable, Equatable {
    package enum State: String, Sendable, Equatable {
        /// A pass is under way.
        case listing
        /// The last pass saw every key.
        case complete
        /// S3 answered 403: the session policy does not allow listing. Uploads ask with a
        /// HEAD per object instead.
        case refused
        /// The last pass failed (S3 unreachable, a malformed answer); it is tried again later.
        case failed
    }

    package var prefix: String
    package var state: State
    /// When the pass under way (or the last one) began.
    package var startedAt: Date?
    /// When the last complete pass ended; nil if no pass ever completed.
    package var listedAt: Date?
    /// Keys under the prefix after the last complete pass.
    package var objects: Int
    /// Keys the pass under way has seen so far.
    package var seen: Int
    /// Passes that failed in a row.
    package var failures: Int
    package var lastError: String?
    /// The last change: a page recorded, a pass begun or ended.
    package var updatedAt: Date

    package init(prefix: String, state: State, startedAt: Date? = nil, listedAt: Date? = nil, objects: Int = 0, seen: Int = 0,
                failures: Int = 0, lastError: String? = nil, updatedAt: Date) {
        self.prefix = prefix
        self.state = state
        self.startedAt = startedAt
        self.listedAt = listedAt
        self.objects = objects
        self.seen = seen
        self.failures = failures
        self.lastError = lastError
        self.updatedAt = updatedAt
    }

    /// A pass once saw every key, so a key absent from the inventory is absent from the
    /// bucket (as of that pass; `If-None-Match: *` covers what came since). Stays true
    /// while a later pass runs or after one failed.
    package var isComplete: Bool { listedAt != nil }
}
