import Foundation
import PhotolalaCore
import Queue

/// When the bucket is listed next, as a pure value tested with plain dates: at once when
/// the user's photos were never listed (a sign-in) or a pass was cut short (a stop, a
/// crash), then every `upload.inventory_interval`; after a failed pass sooner, with
/// backoff; after a refusal (403) at the interval, since a policy rarely changes by itself.
/// `verify` lists at once whatever this says.
package struct InventorySchedule: Sendable, Equatable {
    /// A failed pass is tried again after 1 minute, doubling up to the interval.
    package var retry = Backoff(base: 60, cap: 6 * 3600, jitter: .equal, floor: 30)

    package init() {}

    /// - Parameters:
    ///   - photos: the listing of `photos/{userId}/`, nil if none ever began.
    ///   - random: a draw in 0..<1 for the jitter.
    package func nextListing(photos: InventoryListing?, interval: TimeInterval, now: Date, random: Double) -> Date {
        guard let photos else { return now }
        switch photos.state {
        case .listing:
            return now
        case .complete:
            return (photos.listedAt ?? photos.updatedAt).addingTimeInterval(interval)
        case .refused:
            return photos.updatedAt.addingTimeInterval(interval)
        case .failed:
            let wait = min(interval, retry.delay(after: max(1, photos.failures), random: random))
            return photos.updatedAt.addingTimeInterval(wait)
        }
    }
}
