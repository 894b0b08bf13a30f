import ArgumentParser
import Testing
@testable import CLI

@Suite struct RestoreOptionsTests {
    @Test func ownersComeBackByNameUnlessTold() throws {
        let plain = try #require(try Ctl.parseAsRoot(["restore", "--to", "/r"]) as? RestoreCommand)
        #expect(!plain.numericOwner && !plain.noOwners)
        let numeric = try #require(try Ctl.parseAsRoot(["restore", "--numeric-owner", "--to", "/r"]) as? RestoreCommand)
        #expect(numeric.numericOwner && !numeric.noOwners)
        let keep = try #require(try Ctl.parseAsRoot(["restore", "--no-owners"]) as? RestoreCommand)
        #expect(keep.noOwners)
    }

    @Test func bothOwnerFlagsAtOnceAreRefused() {
        #expect(throws: (any Error).self) { try Ctl.parseAsRoot(["restore", "--numeric-owner", "--no-owners"]) }
    }
}
