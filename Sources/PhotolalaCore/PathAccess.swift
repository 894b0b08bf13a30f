/// Whether a user could list a folder on this NAS (privacy.md "No side doors": a member of
/// the socket group sees only names below folders it could list). Decided from the POSIX
/// permission bits along the folder's real path, as the kernel would for that user: search
/// (x) on every folder from `/` down to it, read (r) on it. Owner bits if the user owns
/// the folder, else group bits if one of its groups owns it, else the others' bits.
///
/// ACLs are not read: a folder carrying one (`system.posix_acl_access`) counts as listable
/// by its owner only, so a name never shows where an ACL might deny it.
package enum PathAccess {
    /// A user as the kernel names it: uid and every group (primary and supplementary).
    package struct Caller: Sendable, Equatable, Hashable {
        package var uid: UInt32
        package var groups: Set<UInt32>
        package init(uid: UInt32, groups: Set<UInt32>) {
            self.uid = uid
            self.groups = groups
        }
    }

    /// What a folder's inode says, for the check.
    package struct Folder: Sendable, Equatable {
        package var mode: UInt32
        package var uid: UInt32
        package var gid: UInt32
        package var hasACL: Bool
        package init(mode: UInt32, uid: UInt32, gid: UInt32, hasACL: Bool = false) {
            self.mode = mode
            self.uid = uid
            self.gid = gid
            self.hasACL = hasACL
        }
    }

    package static let read: UInt32 = 4
    package static let search: UInt32 = 1

    /// Whether `who` has every bit of `wanted` (r = 4, w = 2, x = 1) on `folder`.
    package static func permits(_ folder: Folder, _ who: Caller, _ wanted: UInt32) -> Bool {
        if who.uid == 0 { return true }
        let bits: UInt32
        if folder.uid == who.uid {
            bits = (folder.mode >> 6) & 7
        } else if folder.hasACL {
            return false
        } else if who.groups.contains(folder.gid) {
            bits = (folder.mode >> 3) & 7
        } else {
            bits = folder.mode & 7
        }
        return bits & wanted == wanted
    }

    /// `chain`: the folders from `/` down to the one to list, in order.
    package static func canList(_ chain: [Folder], _ who: Caller) -> Bool {
        guard let last = chain.last else { return false }
        return chain.allSatisfy { permits($0, who, search) } && permits(last, who, read)
    }

    /// The folder holding `path` (its name is an entry there): `/` for a name at the top.
    package static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
