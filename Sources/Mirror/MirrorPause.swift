import PhotolalaCore

/// Whether the mirror may pull now, and if not why (mirror.md "When it waits"), from the
/// facts the stage gathers: pure, so the order of the reasons is tested with plain values.
/// The reason that needs the user most comes first: the account (nothing can be read),
/// the user's own pause, the timetable, then the folder and its free space, which only
/// this stage can see.
package struct MirrorPause: Sendable, Equatable {
    package enum Reason: String, Sendable, Equatable, Codable, CaseIterable {
        /// Signed out, the Apple ID revoked (or not found, transferred), the account paused.
        case account
        /// `photolalactl pause`.
        case user
        /// A `0` slot of the bandwidth timetable.
        case schedule
        /// The folder is missing, its marker is gone (a volume not mounted), or it cannot be written.
        case folder
        /// Its filesystem has less free space than `min_free` (with the next copy written).
        case diskFull
    }

    package struct Facts: Sendable, Equatable {
        /// Why the account stops reading the bucket (nil: it does not).
        package var account: String?
        package var userPaused = false
        package var scheduleZero = false
        /// What is wrong with the folder, in words (nil: nothing).
        package var folder: String?
        package var diskFull = false

        package init(account: String? = nil, userPaused: Bool = false, scheduleZero: Bool = false, folder: String? = nil,
                     diskFull: Bool = false) {
            self.account = account
            self.userPaused = userPaused
            self.scheduleZero = scheduleZero
            self.folder = folder
            self.diskFull = diskFull
        }
    }

    /// nil: the mirror may pull.
    package static func reason(_ f: Facts) -> Reason? {
        if f.account != nil { return .account }
        if f.userPaused { return .user }
        if f.scheduleZero { return .schedule }
        if f.folder != nil { return .folder }
        if f.diskFull { return .diskFull }
        return nil
    }

    /// Whether the folder itself may be looked at (created, its marker written, walked):
    /// only the account stops that, since a pause or a timetable slot concerns the bucket.
    package static func mayLookAtFolder(_ f: Facts) -> Bool { f.account == nil }
}

/// `min_free` (mirror.md): the next copy is written only if the filesystem keeps that much
/// free with it; otherwise the mirror waits (`diskFull`) and resumes by itself once space
/// is freed. Deciding per copy, not per filesystem state, keeps a mirror at the edge from
/// flapping between paused and pulling with each file.
package enum FreeSpaceRule {
    /// - Parameters:
    ///   - available: bytes the daemon's user may still write (statvfs `f_bavail`).
    ///   - total: the filesystem's size.
    ///   - next: the size of the copy about to be written (0: only look).
    package static func fits(available: Int64, total: Int64, next: Int64, minFree: Settings.Mirror.FreeSpace) -> Bool {
        available - next >= minFree.bytes(ofTotal: total)
    }
}

/// The guard of a trash: a full listing that would move more than half of the copies (and
/// more than a few) into `.trash/` at once is more likely a listing gone wrong (another
/// account, a store that answered empty) than a user who deleted half the library: it
/// moves nothing and says so, as rclone bisync's `--max-delete` does (docs/decisions.md).
/// The copies stay counted as "only on this NAS"; the next listing decides again.
package enum TrashGuard {
    package static let floor = 20

    package static func allows(trashing: Int, present: Int) -> Bool {
        trashing <= floor || trashing * 2 <= present
    }
}
