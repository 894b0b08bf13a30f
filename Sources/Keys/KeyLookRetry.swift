import Bucket
import Foundation
import PhotolalaCore

/// Why a look at the account key ended early.
package enum KeyLookFailure: Error {
    /// The bucket changed under a conditional write: look again at once (up to
    /// `KeyLookRetry.conflictsInARow` times; more is a store that does not honour the
    /// condition, as Ceph Pacific refuses a quoted `If-Match` that holds: then backoff, not a spin).
    case again
    /// No grant (signed out, paused, stopping): wait for the account to change.
    case unavailable
    case bucket(S3Error)
    /// The key file cannot be written (its sentence).
    case local(String)

    /// A bucket request that failed: without a grant there is nothing to retry until the
    /// account changes, so that is no failure of the look's own.
    package init(_ error: S3Error) {
        switch error.kind {
        case .unavailable, .cancelled: self = .unavailable
        default: self = .bucket(error)
        }
    }
}

/// When the key service looks again after a look ended early, and what the status says
/// meanwhile. A pure value: a lost race is retried at once, a store that keeps refusing
/// conditional writes is not raced forever, and everything else backs off.
package struct KeyLookRetry: Sendable {
    package enum Next: Sendable, Equatable {
        /// A race lost: look again at once.
        case now
        /// Nothing to do until the sign-in changes.
        case wake
        /// Look again after this many seconds; the sentence is the status's `lastError`.
        case after(TimeInterval, why: String)
    }

    /// A race lost is looked at again at once; this many in a row is the store, not a race.
    package static let conflictsInARow = 3

    private var backoff = Backoff(base: 2, cap: 300, jitter: .equal, floor: 1)
    /// Conditional writes refused since the last look that ended well.
    private var conflicts = 0

    /// A look ended well: the next failure waits the shortest time again.
    mutating func succeeded() {
        backoff.reset()
        conflicts = 0
    }

    /// Another sign-in: its failures start from the shortest wait. Conflicts stay counted:
    /// a store that does not honour the conditions does not start to with another account.
    mutating func restart() {
        backoff.reset()
    }

    /// A look ended early with `failure`; `random` in 0..<1 draws the jitter.
    mutating func failed(_ failure: KeyLookFailure, random: Double) -> Next {
        let why: String
        switch failure {
        case .again where conflicts + 1 < Self.conflictsInARow:
            conflicts += 1
            return .now
        case .unavailable:
            return .wake
        case .bucket(let e):
            why = "cannot check this account's key in the bucket: \(e)"
        case .local(let m):
            why = m
        case .again:
            conflicts = 0
            why = "the bucket refused \(Self.conflictsInARow) conditional writes of this account's key object in a row "
                + "although nothing else seems to write it: does this S3 store honour If-Match and If-None-Match?"
        }
        return .after(backoff.fail(random: random), why: why)
    }
}
