/// Mirror: the NAS keeps its own verified, dated copy of every photo of the account (mirror.md).
import ManifestFormat

/// Where one object of the account stands on this NAS. The mirror knows objects by MD5,
/// never by name: a copy the user renames, moves or deletes is not fetched again.
package enum MirrorState: String, Sendable, Equatable, CaseIterable, Codable {
    /// To be fetched (`nextAttemptAt` says when, after a failure).
    case pending
    /// A watched file of this NAS holds these bytes (`include = "others"`): not copied.
    case own
    /// In an archive class (GLACIER, DEEP_ARCHIVE): a GET would fail. Counted; asked back
    /// with `thaw_archived`.
    case archived
    /// Asked back from the archive (`RestoreObject`): fetched once it can be read.
    case thawing
    /// Written by the mirror, checked, at `path`.
    case copied
    /// Found already in the folder with the object's bytes (`restore --by-date`, the
    /// user's own copy), at `path`.
    case adopted
    /// Copied or adopted once, and no longer at its path ("removed here": renamed, moved
    /// or deleted by the user). Not fetched again until `mirror --refill`.
    case removed
    /// Moved into `FOLDER/.trash/` after the account lost it (`on_cloud_delete = "trash"`).
    case trashed
    /// Its body was not what its key and listing say (another MD5, too long): refused,
    /// nothing under a final name; tried again later.
    case refused

    /// The states in which a file of the mirror stands for the object.
    package var isPresent: Bool { self == .copied || self == .adopted }
}

/// One object as the mirror records it (`mirror_object`).
package struct MirrorEntry: Sendable, Equatable {
    package var md5: MD5Value
    /// The size the listing (or a HEAD) gave: the body is bounded by it.
    package var size: Int64
    package var storageClass: String
    /// The object's last-modified time, Unix seconds (nil: not known).
    package var modified: Int64?
    /// The catalog's `photo_date` for it (nil: no row, or none in it).
    package var catalogDate: Int64?
    /// The extension privacy.md's export gives it (`ExportFormat`); nil until known.
    package var ext: String?
    /// Below the folder, `YYYY/MM/…`: given once, before the first byte is fetched, and
    /// kept (a restart finds a file a kill left there under the same name).
    package var path: String?
    package var state: MirrorState
    /// The account no longer holds it (a full listing lacked it, or a fetch found it gone).
    package var gone: Bool
    /// The file written or adopted (device and inode), to tell it from another at its path.
    package var device: UInt64?
    package var inode: UInt64?
    package var attempts: Int
    package var refusals: Int
    /// Unix seconds; nil: now.
    package var nextAttemptAt: Double?
    /// When it was asked back from the archive, Unix seconds.
    package var thawAskedAt: Double?
    package var lastError: String?

    package init(md5: MD5Value, size: Int64, storageClass: String = "STANDARD", modified: Int64? = nil, catalogDate: Int64? = nil,
                 ext: String? = nil, path: String? = nil, state: MirrorState, gone: Bool = false, device: UInt64? = nil,
                 inode: UInt64? = nil, attempts: Int = 0, refusals: Int = 0, nextAttemptAt: Double? = nil, thawAskedAt: Double? = nil,
                 lastError: String? = nil) {
        self.md5 = md5
        self.size = size
        self.storageClass = storageClass
        self.modified = modified
        self.catalogDate = catalogDate
        self.ext = ext
        self.path = path
        self.state = state
        self.gone = gone
        self.device = device
        self.inode = inode
        self.attempts = attempts
        self.refusals = refusals
        self.nextAttemptAt = nextAttemptAt
        self.thawAskedAt = thawAskedAt
        self.lastError = lastError
    }

    /// The key of its object under `photos/{userId}/`.
    package func key(userId: String) -> String { "photos/\(userId)/\(md5.hex).dat" }
}
