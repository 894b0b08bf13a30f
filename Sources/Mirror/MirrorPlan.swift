import ManifestFormat
import PhotolalaCore
import Restore

/// What the bucket's answer about an object does to its entry, as pure values (mirror.md
/// "What is copied"): a listing's key or a HEAD, the account losing an object, the
/// catalog naming a date. The stage applies each change in the page's transaction and
/// writes nothing when nothing changed (an idle NAS keeps its disks asleep).
package enum MirrorPlan {
    /// An object as a listing page (or a HEAD) gives it.
    package struct Listed: Sendable, Equatable {
        package var md5: MD5Value
        package var size: Int64
        package var storageClass: String
        package var modified: Int64?

        package init(md5: MD5Value, size: Int64, storageClass: String = "STANDARD", modified: Int64? = nil) {
            self.md5 = md5
            self.size = size
            self.storageClass = storageClass
            self.modified = modified
        }
    }

    package enum Change: Sendable, Equatable {
        case none
        case insert(MirrorEntry)
        case update(MirrorEntry)
    }

    /// GLACIER and DEEP_ARCHIVE cannot be read before a copy is asked back; GLACIER_IR can.
    package static func isArchived(_ storageClass: String) -> Bool {
        storageClass == "GLACIER" || storageClass == "DEEP_ARCHIVE"
    }

    /// What `listed` does to `entry` (nil: the mirror has never seen the object).
    /// - Parameters:
    ///   - own: a watched file of this NAS (outside the mirror folder) holds these bytes.
    package static func listed(_ listed: Listed, entry: MirrorEntry?, own: Bool, include: Settings.Mirror.Include) -> Change {
        let skip = own && include == .others
        let archived = isArchived(listed.storageClass)
        guard var e = entry else {
            let state: MirrorState = skip ? .own : archived ? .archived : .pending
            return .insert(MirrorEntry(md5: listed.md5, size: listed.size, storageClass: listed.storageClass, modified: listed.modified,
                                       state: state))
        }
        let before = e
        // Listed again: the account holds it (again).
        e.gone = false
        switch e.state {
        case .copied, .adopted, .removed, .trashed:
            // A copy was checked by its MD5 when it was written: whatever the bucket says of
            // its size or class now does not change it.
            break
        case .own, .pending, .archived, .thawing, .refused:
            if e.size != listed.size {
                // Other bytes under the key than before: start over with them.
                e.size = listed.size
                e.attempts = 0
                e.refusals = 0
                e.nextAttemptAt = nil
                e.lastError = nil
            }
            e.storageClass = listed.storageClass
            if e.path == nil { e.modified = listed.modified ?? e.modified }
            if skip {
                e.state = .own
            } else if archived {
                // Asked back already (and perhaps readable now, though still listed in its
                // archive class): the HEADs and the GET tell.
                if e.state != .thawing && !(e.state == .pending && e.thawAskedAt != nil) { e.state = .archived }
            } else if e.state == .own || e.state == .archived || e.state == .thawing {
                e.state = .pending
                e.thawAskedAt = nil
            }
        }
        return e == before ? .none : .update(e)
    }

    /// What the account losing the object does.
    package enum Lost: Sendable, Equatable {
        /// Nothing of it is on this NAS: the entry goes.
        case forget
        /// Its copy stays where it is, counted as "only on this NAS" (or it was removed here).
        case mark(MirrorEntry)
        /// Its copy moves into `.trash/` (then `trashed`).
        case trash(MirrorEntry)
        case none
    }

    package static func lost(_ entry: MirrorEntry, onCloudDelete: Settings.Mirror.OnCloudDelete) -> Lost {
        switch entry.state {
        case .pending, .own, .archived, .thawing, .refused:
            // Not written, or written nowhere yet (a path given before a kill names no file
            // that holds the bytes: the next run checks before it adopts anything).
            return .forget
        case .copied, .adopted:
            if onCloudDelete == .trash { return .trash(entry) }
            guard !entry.gone else { return .none }
            var e = entry
            e.gone = true
            return .mark(e)
        case .removed, .trashed:
            guard !entry.gone else { return .none }
            var e = entry
            e.gone = true
            return .mark(e)
        }
    }

    /// The catalog's date and format for an entry not written yet (its name follows the
    /// newest catalog until then; a written file keeps its name).
    package static func dated(_ entry: MirrorEntry, catalogDate: Int64?, ext: String?) -> MirrorEntry? {
        guard entry.path == nil, !entry.state.isPresent else { return nil }
        var e = entry
        e.catalogDate = catalogDate
        if let ext { e.ext = ext }
        return e == entry ? nil : e
    }

    /// The date an entry's file is named and stamped with (privacy.md's export rule).
    package static func date(of entry: MirrorEntry) -> Int64 {
        ExportName.date(catalog: entry.catalogDate, modified: entry.modified).seconds
    }
}
