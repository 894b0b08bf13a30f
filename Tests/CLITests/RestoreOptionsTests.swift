import ArgumentParser
import Testing
import CLI

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

    @Test func byDateTakesToDryRunAndJSONOnly() throws {
        let export = try #require(try Ctl.parseAsRoot(["restore", "--by-date", "--to", "/r", "--dry-run", "--json"]) as? RestoreCommand)
        #expect(export.byDate && export.to == "/r" && export.dryRun && export.json)
        // Without --to there is nowhere to put every photo of the account.
        #expect(throws: (any Error).self) { try Ctl.parseAsRoot(["restore", "--by-date"]) }
        // The manifest's options do not apply: no device, time, paths, overwriting or owners.
        for extra in [["--device", "nas"], ["--as-of", "2026-11-22"], ["--overwrite"], ["--numeric-owner"], ["--no-owners"], ["/srv/photos"]] {
            #expect(throws: (any Error).self, "\(extra)") { try Ctl.parseAsRoot(["restore", "--by-date", "--to", "/r"] + extra) }
        }
    }
}
