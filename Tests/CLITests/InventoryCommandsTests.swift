import ArgumentParser
import Control
import Foundation
import PhotolalaCore
import Testing
@testable import CLI

/// `photolalactl verify` and `files`: their command lines and what a person reads.
@Suite struct InventoryCommandsTests {
    @Test func verifyTakesADeepShare() throws {
        let plain = try #require(try Ctl.parseAsRoot(["verify"]) as? VerifyCommand)
        #expect(plain.deep == nil && !plain.json)
        let deep = try #require(try Ctl.parseAsRoot(["verify", "--deep", "2.5", "--json"]) as? VerifyCommand)
        #expect(deep.deep == 2.5 && deep.json)
        #expect(try (Ctl.parseAsRoot(["verify", "--deep", "100"]) as? VerifyCommand)?.deep == 100)
    }

    @Test(arguments: ["0", "-1", "100.5", "x"])
    func aDeepShareOutsideZeroToAHundredIsAUsageError(value: String) {
        do {
            _ = try Ctl.parseAsRoot(["verify", "--deep", value])
            Issue.record("--deep \(value) parsed")
        } catch {
            #expect(Ctl.exitCode(for: error) == .validationFailure)
        }
    }

    @Test func filesTakesAnyNumberOfPaths() throws {
        let none = try #require(try Ctl.parseAsRoot(["files"]) as? FilesCommand)
        #expect(none.paths.isEmpty)
        let some = try #require(try Ctl.parseAsRoot(["files", "/srv/a.jpg", "2024", "--json"]) as? FilesCommand)
        #expect(some.paths == ["/srv/a.jpg", "2024"] && some.json)
    }

    @Test func pathsAreMadeAbsoluteWithoutDotsForTheDaemon() {
        #expect(FilesCommand.absolute("/srv/photos/./2024/../a.jpg") == "/srv/photos/a.jpg")
        #expect(FilesCommand.absolute("x.jpg") == FileManager.default.currentDirectoryPath + "/x.jpg")
    }

    func done(_ r: DaemonStatus.Verify) -> VerifyProgress {
        VerifyProgress(phase: .done, result: r)
    }

    @Test func aCleanVerifyIsOneLine() {
        let text = VerifyCommand.render(done(.init(checkedAt: "2026-11-22T07:10:00Z", checked: 5)), json: false)
        #expect(text == "Checked 5 objects against a fresh listing of the bucket: every one is there with its size and the ETag of its bytes.\n")
    }

    @Test func problemsAreCountedAndSaidToBeSentAgain() {
        let r = DaemonStatus.Verify(checked: 9, missing: 1, mismatched: 2, wrongSize: 1, wrongETag: 0, deepPercent: 100,
                                    readBack: 8, readBackWrong: 1, requeued: 3, lost: 1)
        let text = VerifyCommand.render(done(r), json: false)
        #expect(text.contains("  missing             1\n"))
        #expect(text.contains("  of the wrong size   1\n"))
        #expect(text.contains("  other bytes (read)  1\n"))
        #expect(text.contains("Read back 8 objects (--deep 100%): 1 with other bytes than their key names."))
        #expect(text.contains("3 objects queued to be sent again"))
        #expect(text.contains("1 of them cannot be sent again: no file on this NAS holds those bytes any more."))
    }

    @Test func sseKMSSaysDeepIsTheWay() {
        let r = DaemonStatus.Verify(checked: 4, unproven: 4, sseKms: true)
        let text = VerifyCommand.render(done(r), json: false)
        #expect(text.contains("SSE-KMS") && text.contains("photolalactl verify --deep 100"))
        #expect(text.hasPrefix("Checked 4 objects against a fresh listing of the bucket: every one is there with its size.\n"))
    }

    @Test func verifyJSONIsTheStatusFields() throws {
        let r = DaemonStatus.Verify(checkedAt: "2026-11-22T07:10:00Z", checked: 3, missing: 1, mismatched: 0, requeued: 1)
        let json = VerifyCommand.render(done(r), json: true)
        let back = try JSONDecoder().decode(DaemonStatus.Verify.self, from: Data(json.utf8))
        #expect(back == r)
        let keys = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        for key in ["checkedAt", "checked", "missing", "mismatched", "requeued", "sseKms", "readBack"] { #expect(keys[key] != nil, "\(key)") }
    }

    @Test func progressLines() {
        #expect(VerifyCommand.progressLine(VerifyProgress(phase: .listing, done: 3000)) == "listing the bucket: 3000 objects so far…")
        #expect(VerifyCommand.progressLine(VerifyProgress(phase: .readingBack, done: 2, total: 9)) == "reading back: 2 of 9 objects…")
    }

    let uploaded = FileListing.Item(path: "/srv/photos/a.jpg", state: "uploaded", size: 2_100_000, md5: String(repeating: "a", count: 32),
                                    key: "photos/U/\(String(repeating: "a", count: 32)).dat", uploadedAt: "2026-11-22T07:10:00Z", lastError: nil)

    @Test func oneFileAskedByNameShowsEverything() {
        let text = FilesCommand.block(uploaded)
        #expect(text.hasPrefix("/srv/photos/a.jpg\n  state       uploaded — backed up\n"))
        #expect(text.contains("  md5         \(String(repeating: "a", count: 32))\n"))
        #expect(text.contains("  key         photos/U/"))
        #expect(text.contains("  went up     2026-11-22T07:10:00Z\n"))
    }

    @Test func aFolderIsOneLineAFileWithWhyAFailedOneFailed() {
        let failed = FileListing.Item(path: "/srv/photos/b.jpg", state: "failed", size: 10, md5: nil, key: nil, uploadedAt: nil,
                                      lastError: "permission denied")
        let row = FilesCommand.row(uploaded)
        #expect(row.hasPrefix("uploaded   2.1 MB     2026-11-22 07:10 UTC "))
        #expect(row.hasSuffix(" /srv/photos/a.jpg\n"))
        #expect(FilesCommand.row(failed).hasSuffix("/srv/photos/b.jpg — permission denied\n"))
        var tally = FilesCommand.Tally()
        tally.add(uploaded)
        tally.add(failed)
        tally.add(uploaded)
        #expect(tally.summary == "3 files: 2 uploaded, 1 failed")
    }

    @Test func filesJSONItemsCarryTheContractsFields() throws {
        let line = FilesCommand.jsonLine(uploaded)
        let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        for key in ["path", "state", "size", "md5", "key", "uploadedAt"] { #expect(o[key] != nil, "\(key)") }
        #expect(FilesCommand.quoted("a \"b\"") == #""a \"b\"""#)
    }
}

/// What `status` says about the bucket's listing and the last verify.
@Suite struct StatusInventoryLinesTests {
    func lines(_ s: DaemonStatus) -> [String] {
        StatusRenderer.inventoryLines(s, tint: { text, _ in text })
    }

    @Test func aListedBucketAndACleanVerify() {
        var s = DaemonStatus(state: .running)
        s.inventory = .init(objects: 60212, listedAt: "2026-11-22T03:00:00Z", state: .ok, nextListingAt: "2026-11-23T03:00:00Z")
        s.verify = .init(checkedAt: "2026-11-22T04:00:00Z", checked: 58113)
        #expect(lines(s) == ["Bucket     60212 objects at the last listing, 2026-11-22T03:00:00Z; next 2026-11-23T03:00:00Z",
                             "Verified   2026-11-22T04:00:00Z: 58113 checked, 0 missing, 0 with other bytes or size"])
    }

    @Test func aRefusedListingSaysUploadsAskWithHead() {
        var s = DaemonStatus(state: .running)
        s.inventory = .init(state: .refused, uploadsCheck: .head, lastError: "S3 refused to list photos/U/ (403 AccessDenied)")
        #expect(lines(s) == ["Bucket     listing refused (403): uploads ask S3 about each object with a HEAD",
                             "           S3 refused to list photos/U/ (403 AccessDenied)"])
    }

    @Test func theFirstListingHoldsUploadsBack() {
        var s = DaemonStatus(state: .running)
        s.inventory = .init(state: .listing, seen: 3000, uploadsCheck: .waiting)
        s.verify = .init(running: true)
        #expect(lines(s) == ["Bucket     listing: 3000 objects so far",
                             "           uploads wait for the first listing (so nothing already there is sent)",
                             "Verify     under way (`photolalactl verify` shows its progress)"])
    }
}
