#if canImport(Glibc)
import Glibc
#endif
import Foundation
import ManifestFormat
import Testing
import RestoreFiles

@Suite struct OwnerRuleTests {
    let names: [String: UInt32] = ["al": 1000, "users": 100]

    @Test func asRootByNameFirstThenByNumber() {
        let rule = OwnerRule(owners: .byName, mayChown: true, umask: 0o022)
        let known = Ownership(uid: 5000, gid: 5001, user: "al", group: "users", mode: 0o640)
        let ids = rule.ids(known, user: { names[$0] }, group: { names[$0] })
        #expect(ids?.uid == 1000 && ids?.gid == 100)
        let unknown = Ownership(uid: 5000, gid: 5001, user: "gone", group: nil, mode: 0o640)
        let byNumber = rule.ids(unknown, user: { names[$0] }, group: { names[$0] })
        #expect(byNumber?.uid == 5000 && byNumber?.gid == 5001)
    }

    @Test func numericOwnerNoOwnersAndNotRoot() {
        let o = Ownership(uid: 5000, gid: 5001, user: "al", group: "users", mode: 0o640)
        let numeric = OwnerRule(owners: .numeric, mayChown: true, umask: 0o022).ids(o, user: { names[$0] }, group: { names[$0] })
        #expect(numeric?.uid == 5000 && numeric?.gid == 5001)
        #expect(OwnerRule(owners: .keep, mayChown: true, umask: 0o022).ids(o, user: { names[$0] }, group: { names[$0] }) == nil)
        #expect(OwnerRule(owners: .byName, mayChown: false, umask: 0o022).ids(o, user: { names[$0] }, group: { names[$0] }) == nil)
    }

    @Test func setuidSetgidAndStickyNeverOntoFiles() {
        let rule = OwnerRule(owners: .byName, mayChown: false, umask: 0o027)
        #expect(rule.fileMode(Ownership(uid: 0, gid: 0, mode: 0o7755)) == 0o755)
        #expect(rule.fileMode(Ownership(uid: 0, gid: 0, mode: 0o640)) == 0o640)
        #expect(rule.fileMode(nil) == 0o640)
        // On folders setgid (a shared group) and sticky stay; setuid means nothing there.
        #expect(rule.folderMode(Ownership(uid: 0, gid: 0, mode: 0o7775)) == 0o3775)
    }
}

/// Owners and modes on real files (this suite needs root, as a restore that gives owners back does).
@Suite(.enabled(if: geteuid() == 0, "gives files away: needs root")) struct OwnershipWritingTests {
    let w: WriterWorld
    init() throws { w = try WriterWorld() }

    func restore(_ writer: RestoreWriter, _ path: String, owner: Ownership?) async throws {
        let data = Array(path.utf8)
        #expect(try await w.put(writer, w.item(path, data, owner: owner), data))
    }

    func ids(_ path: String) -> (UInt32, UInt32, UInt32)? {
        w.stat(path).map { ($0.st_uid, $0.st_gid, UInt32($0.st_mode & 0o7777)) }
    }

    @Test func filesGoToTwoDifferentUsersAndGroupsByName() async throws {
        let daemon = try #require(getpwnam("daemon")).pointee
        let bin = try #require(getgrnam("bin")).pointee
        let nobody = try #require(getpwnam("nobody")).pointee
        let writer = RestoreWriter(overwrite: false)
        // The recorded numbers are another system's: the names decide.
        try await restore(writer, "a.jpg", owner: Ownership(uid: 4242, gid: 4343, user: "daemon", group: "bin", mode: 0o640))
        try await restore(writer, "b.jpg", owner: Ownership(uid: 4242, gid: 4343, user: "nobody", group: "daemon", mode: 0o6755))
        try await restore(writer, "c.jpg", owner: Ownership(uid: 4242, gid: 4343, user: "no-such-user-here", group: "no-such-group-here", mode: 0o600))
        #expect(ids("photos/a.jpg")! == (daemon.pw_uid, bin.gr_gid, 0o640))
        #expect(ids("photos/b.jpg")! == (nobody.pw_uid, daemon.pw_gid, 0o755))
        #expect(ids("photos/c.jpg")! == (4242, 4343, 0o600))
    }

    @Test func numericOwnerAndNoOwners() async throws {
        let owner = Ownership(uid: 4242, gid: 4343, user: "daemon", group: "bin", mode: 0o604)
        try await restore(RestoreWriter(overwrite: false, owners: .numeric), "n.jpg", owner: owner)
        #expect(ids("photos/n.jpg")! == (4242, 4343, 0o604))
        try await restore(RestoreWriter(overwrite: false, owners: .keep), "k.jpg", owner: owner)
        #expect(ids("photos/k.jpg")! == (geteuid(), getegid(), 0o604))
        // As another user: modes only.
        try await restore(RestoreWriter(overwrite: false, owners: .byName, mayChown: false), "m.jpg", owner: owner)
        #expect(ids("photos/m.jpg")! == (geteuid(), getegid(), 0o604))
    }

    @Test func createdFoldersGetTheirOwnersAfterTheirContents() async throws {
        let dir = Ownership(uid: 4242, gid: 4343, user: "daemon", group: "bin", mode: 0o2750)
        let readOnly = Ownership(uid: 4444, gid: 4545, mode: 0o4555)
        // A folder that was there before is not the restore's to change.
        try FileManager.default.createDirectory(atPath: w.root + "/existing", withIntermediateDirectories: true)
        let before = try #require(ids("existing"))
        let writer = RestoreWriter(overwrite: false, folderOwners: [w.root: [Array("photos".utf8): dir, Array("photos/ro".utf8): readOnly,
                                                                            Array("existing".utf8): readOnly]])
        try await restore(writer, "ro/a.jpg", owner: nil)
        try await restore(writer, "ro/deeper/b.jpg", owner: nil)
        var there = w.item("x", Array("x".utf8))
        there.destination = Array("existing/x.jpg".utf8)
        #expect(try await w.put(writer, there, Array("x".utf8)))
        // Until the end: private, the restoring user's.
        #expect(ids("photos/ro")! == (geteuid(), getegid(), 0o700))
        #expect(writer.finish().isEmpty)
        let daemon = try #require(getpwnam("daemon")).pointee
        let bin = try #require(getgrnam("bin")).pointee
        #expect(ids("photos")! == (daemon.pw_uid, bin.gr_gid, 0o2750))
        #expect(ids("photos/ro")! == (4444, 4545, 0o555))
        #expect(ids("existing")! == before)
        // A folder with nothing recorded: what mkdir gives.
        #expect(ids("photos/ro/deeper").map { $0.2 } == 0o777 & ~OwnerRule.currentUmask())
    }
}
