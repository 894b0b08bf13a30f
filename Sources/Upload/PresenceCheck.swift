import Foundation
import Queue

/// How the uploader learns whether an object is already in the bucket, as a pure value
/// (s3-layout.md, "Knowing what is already there"): from the inventory once a listing
/// of the user's photos completed; with a HEAD per object where listing is refused or
/// failing; and right after a sign-in, by waiting for the first listing, so photos
/// already in the bucket cost no request of their own at all.
package struct PresenceCheck: Sendable, Equatable {
    /// How long uploads wait for a first listing to begin before asking with HEAD instead
    /// (the inventory stage begins one within a second of a sign-in).
    package var firstListingWait: TimeInterval = 60
    /// A first listing that records no page for this long is taken for stuck: HEAD
    /// meanwhile. A page takes well under a second from S3; this is for a hung pass.
    package var stalledListing: TimeInterval = 120

    package init() {}

    /// How the uploader finds out, for every object, for now.
    package enum Mode: Sendable, Equatable {
        /// A complete listing exists: listed or not listed is the answer.
        case inventory
        /// No usable listing (refused, failing, stuck): a HEAD per object, as before listings.
        case head
        /// The first listing is under way (or about to begin): claim nothing until it ends,
        /// or until this moment, when `mode` is asked again.
        case wait(until: Date)
    }

    /// - Parameters:
    ///   - listing: the listing of `photos/{userId}/`, nil if none ever began.
    ///   - waitingSince: when the uploader first wanted to upload for this user.
    package func mode(listing: InventoryListing?, waitingSince: Date, now: Date) -> Mode {
        guard let listing else {
            let until = waitingSince.addingTimeInterval(firstListingWait)
            return now < until ? .wait(until: until) : .head
        }
        if listing.isComplete { return .inventory }
        switch listing.state {
        case .listing:
            let until = listing.updatedAt.addingTimeInterval(stalledListing)
            return now < until ? .wait(until: until) : .head
        case .refused, .failed, .complete:
            return .head
        }
    }

    /// What to do for one object.
    package enum Step: Sendable, Equatable {
        /// In the bucket with its size: mark it uploaded, send nothing.
        case alreadyThere
        /// Ask S3 first.
        case head
        /// Send it; `ifNoneMatch`: only if the key is free (`If-None-Match: *`, a 412 means
        /// another device put it there meanwhile). Without it, what is there is replaced.
        case put(ifNoneMatch: Bool)
    }

    /// - Parameters:
    ///   - presence: what the inventory knows of the object's key.
    ///   - overwrite: `verify` found the object in the bucket wrong: replace it, unasked.
    package func step(mode: Mode, presence: InventoryPresence, size: Int64, overwrite: Bool) -> Step {
        if overwrite { return .put(ifNoneMatch: false) }
        guard mode == .inventory else { return .head }
        switch presence {
        case .present(let entry):
            // Same key, other size: not these bytes (a broken upload by some other tool).
            return entry.size == size ? .alreadyThere : .put(ifNoneMatch: false)
        case .absent:
            return .put(ifNoneMatch: true)
        case .unknown:
            return .head
        }
    }

    /// After a HEAD answered: `size` nil means no such key.
    package func afterHead(listedSize: Int64?, size: Int64) -> Step {
        guard let listedSize else { return .put(ifNoneMatch: true) }
        return listedSize == size ? .alreadyThere : .put(ifNoneMatch: false)
    }
}
