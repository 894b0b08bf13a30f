import Testing
import PhotolalaCore

/// Who could list a folder, from the POSIX bits along its path (no ACLs read).
@Suite struct PathAccessTests {
    typealias F = PathAccess.Folder
    let member = PathAccess.Caller(uid: 1000, groups: [1000, 100])
    let root = F(mode: 0o755, uid: 0, gid: 0)

    @Test func ownerGroupOrOthersBitsDecideInThatOrder() {
        // Owner bits win even when they give less than the group's (as the kernel does).
        #expect(!PathAccess.permits(F(mode: 0o075, uid: 1000, gid: 100), member, PathAccess.read))
        #expect(PathAccess.permits(F(mode: 0o450, uid: 1000, gid: 100), member, PathAccess.read))
        // A group of the member's, supplementary included.
        #expect(PathAccess.permits(F(mode: 0o750, uid: 0, gid: 100), member, PathAccess.read | PathAccess.search))
        #expect(!PathAccess.permits(F(mode: 0o705, uid: 0, gid: 100), member, PathAccess.read), "group bits, not the others'")
        #expect(PathAccess.permits(F(mode: 0o705, uid: 0, gid: 0), member, PathAccess.read))
        #expect(!PathAccess.permits(F(mode: 0o700, uid: 0, gid: 0), member, PathAccess.search))
        #expect(PathAccess.permits(F(mode: 0o000, uid: 5, gid: 5), PathAccess.Caller(uid: 0, groups: []), PathAccess.read))
    }

    @Test func listingNeedsSearchAlongThePathAndReadOnTheLast() {
        let photos = F(mode: 0o755, uid: 0, gid: 0)
        #expect(PathAccess.canList([root, photos], member))
        // A 0700 folder of root's: its names are not the member's to see, nor anything below.
        let privateFolder = F(mode: 0o700, uid: 0, gid: 0)
        #expect(!PathAccess.canList([root, photos, privateFolder], member))
        #expect(!PathAccess.canList([root, photos, privateFolder, F(mode: 0o777, uid: 1000, gid: 1000)], member))
        // Search without read: the folder can be passed through, not listed.
        let passThrough = F(mode: 0o711, uid: 0, gid: 0)
        #expect(!PathAccess.canList([root, passThrough], member))
        #expect(PathAccess.canList([root, passThrough, F(mode: 0o755, uid: 0, gid: 0)], member))
        // Read without search: names, but the member could not reach them (nor `ls -l` them).
        #expect(!PathAccess.canList([root, F(mode: 0o744, uid: 0, gid: 0)], member))
        #expect(!PathAccess.canList([], member))
    }

    @Test func aFolderWithAnACLIsItsOwnersOnly() {
        let acl = F(mode: 0o775, uid: 0, gid: 100, hasACL: true)
        #expect(!PathAccess.canList([root, acl], member))
        #expect(PathAccess.canList([root, F(mode: 0o700, uid: 1000, gid: 1000, hasACL: true)], member))
    }

    @Test func theParentOfAName() {
        #expect(PathAccess.parent(of: "/srv/photos/a.jpg") == "/srv/photos")
        #expect(PathAccess.parent(of: "/srv") == "/")
        #expect(PathAccess.parent(of: "a") == ".")
    }
}
