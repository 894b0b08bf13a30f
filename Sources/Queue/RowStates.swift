import Foundation
import GRDB

/// Where one file (a path) stands. `queued` means hashed and waiting for its object's
/// upload; the CLI shows it as `pending`, as cli.md defines that word.
package enum FileState: String, Sendable, Codable, CaseIterable, DatabaseValueConvertible {
    case pending, queued, uploading, uploaded, failed, gone

    /// The word of shared/spec/cli.md for this state.
    package var publicName: String {
        switch self {
        case .queued: "pending"
        default: rawValue
        }
    }

    /// What a file holding an object's bytes stands at while the object is in `object`.
    package init(following object: ObjectState) {
        switch object {
        case .pending: self = .queued
        case .uploading: self = .uploading
        case .uploaded: self = .uploaded
        case .failed: self = .failed
        }
    }
}

/// Where one object (a content, keyed by MD5) stands.
package enum ObjectState: String, Sendable, Codable, CaseIterable, DatabaseValueConvertible {
    case pending, uploading, uploaded, failed
}

/// Where one photo (the thumbnail stage's row for an uploaded object) stands.
package enum PhotoState: String, Sendable, Codable, CaseIterable, DatabaseValueConvertible {
    /// Waiting to be read for its thumbnail and columns.
    case pending
    /// The thumbnail is in the bucket and the columns are filled: the catalog publishes it.
    case ready
    /// A format the apps do not show.
    case skipped
    /// Could not be decoded (`lastError` says why), until `retry`.
    case failed
}

/// The state enums as SQL text, for the few statements that cannot take them as bound
/// values: a query the planner must see the value in (a partial index answers only a
/// constant), and statement text shared with another connection or batch. Anywhere else
/// states are bound (`arguments:`), as GRDB binds any `DatabaseValueConvertible`.
package protocol SQLStateLiteral: RawRepresentable<String> {}

extension SQLStateLiteral {
    /// `'ready'`: the raw value quoted (the raw values are plain words).
    package var sqlLiteral: String { "'\(rawValue)'" }
}

extension FileState: SQLStateLiteral {}
extension ObjectState: SQLStateLiteral {}
extension PhotoState: SQLStateLiteral {}

/// One edge of the object state machine: where an object goes, and where the files
/// holding its bytes go with it. `Transitions.moveObject` performs it; this is the table
/// it follows (and the one `QueueTests` checks it against).
package enum ObjectMove: Sendable, Equatable {
    /// A start after a crash: the uploads it interrupted wait again (their multipart
    /// state stays).
    case recover
    /// A worker takes the object to send it.
    case claim
    /// Sent (`etag` is what S3 lists for what was sent), or found in the bucket already
    /// (`etag` nil: nothing of ours was sent). `at`: when it went up.
    case uploaded(etag: String?, at: Date)
    /// Back to the queue after a transient failure or a stop: due again at `retryAt`.
    case release(retryAt: Date?, error: String?, countAttempt: Bool)
    /// The file being sent no longer holds the bytes: the object waits for any other file
    /// that does, with nothing else changed.
    case giveBack
    /// Rejected by S3 for good: `failed` with the reason, until `retry`.
    case fail(reason: String)
    /// The bucket lacks it or holds it wrong (`overwrite`: replace it without asking): it
    /// is sent again from the files that still hold it. An object no file holds stays.
    case lost(reason: String, overwrite: Bool)
    /// `photolalactl retry`: a failed object is tried again from the start.
    case retry

    /// The object states this move takes an object from.
    package var from: Set<ObjectState> {
        switch self {
        case .recover, .release, .giveBack: [.uploading]
        case .claim: [.pending]
        case .uploaded, .fail: Set(ObjectState.allCases)
        case .lost: [.uploaded]
        case .retry: [.failed]
        }
    }

    /// Where the object goes.
    package var to: ObjectState {
        switch self {
        case .recover, .release, .giveBack, .lost, .retry: .pending
        case .claim: .uploading
        case .uploaded: .uploaded
        case .fail: .failed
        }
    }

    /// The states of the object's files that follow it (to `FileState(following: to)`);
    /// its files in any other state stay where they are. A failed object's files are put
    /// back by `Transitions.retryFailedFiles` (unreadable ones are failed too, with no object).
    package var filesFrom: Set<FileState> {
        switch self {
        case .recover, .release, .giveBack: [.uploading]
        case .claim: [.queued]
        case .uploaded: [.queued, .uploading, .failed]
        case .fail: [.queued, .uploading]
        case .lost: [.uploaded]
        case .retry: []
        }
    }

    /// Where the files that follow go.
    package var filesTo: FileState { FileState(following: to) }
}
