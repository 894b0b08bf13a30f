import Foundation
import PhotolalaCore

/// Every decision of the manifest stage that can be tested with plain numbers: when the
/// changes waiting are written as a segment, when the log is compacted into a snapshot,
/// and how long to wait after a failure.
package struct ManifestPolicy: Sendable, Equatable {
    /// Most records in one log segment, and in one snapshot part (under 1 MB each): what
    /// the stage holds in memory at once, whatever the library's size.
    package var maxEntriesPerSegment = 5_000
    package var maxEntriesPerPart = 20_000
    /// While uploads go on, changes are gathered this long into one segment…
    package var busyDelay: TimeInterval = 60
    /// …and once nothing waits to be uploaded, written after this short pause.
    package var quietDelay: TimeInterval = 2
    /// Compact once the log since the last snapshot holds this share of the snapshot's
    /// records (and at least `minCompactEntries`), or once it is this many segments long:
    /// the total written stays a small multiple of the library, and a reader fetches few objects.
    package var compactRatio = 0.5
    package var minCompactEntries = 10_000
    package var maxLogSegments = 200
    /// After a failed write: 2 s doubling to 5 minutes, full jitter, as the uploader's.
    package var retry = Backoff(base: 2, cap: 300, jitter: .full, floor: 1)
    /// How often the stage looks for changes nothing signalled (files gone, renamed).
    package var pollInterval: TimeInterval = 10

    package init() {}

    /// When the changes waiting should be written.
    package enum Flush: Sendable, Equatable {
        case now
        case at(Date)
    }

    /// - Parameters:
    ///   - pending: records ready to write.
    ///   - waitingSince: when the stage first saw changes it has not written yet.
    ///   - uploadsInFlight: objects still waiting to be uploaded or on the wire.
    package func flush(pending: Int, waitingSince: Date, uploadsInFlight: Bool, now: Date) -> Flush {
        if pending >= maxEntriesPerSegment { return .now }
        let due = waitingSince.addingTimeInterval(uploadsInFlight ? busyDelay : quietDelay)
        return due <= now ? .now : .at(due)
    }

    package func shouldCompact(logEntries: Int64, logSegments: Int64, snapshotEntries: Int64) -> Bool {
        guard logSegments > 0 else { return false }
        if logSegments >= Int64(maxLogSegments) { return true }
        return logEntries >= Int64(minCompactEntries) && Double(logEntries) >= compactRatio * Double(snapshotEntries)
    }
}
