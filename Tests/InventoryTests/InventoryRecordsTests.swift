import Foundation
import GRDB
import Inventory
import Ingest
import PhotolalaCore
import Queue
import Testing
import Upload

/// The inventory in the real queue database: listing pages, what a complete listing
/// removes, what it marks uploaded, what goes back to be sent, and the questions other
/// stages ask.
@Suite struct InventoryRecordsTests {
    let db: QueueDatabase
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let prefix = "photos/U/"
    let a = String(repeating: "a", count: 32)
    let b = String(repeating: "b", count: 32)
    let c = String(repeating: "c", count: 32)

    init() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("queue-inventory-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        db = try QueueDatabase.open(path: dir.appendingPathComponent("queue.db").path)
    }

    func queued(_ path: String, inode: UInt64, md5: String, size: Int64 = 100) async throws {
        let identity = FileIdentity(device: 1, inode: inode, size: size, mtimeSec: 1, mtimeNsec: 0)
        try await db.observe([ObservedFile(path: path, identity: identity)], now: t0)
        #expect(try await db.recordHash(path: path, identity: identity, md5: md5, now: t0) == .recorded(.queued))
    }

    func objectState(_ md5: String) throws -> (state: String, overwrite: Bool, etag: String?, uploadedAt: Double?) {
        try db.pool.read { d in
            let row = try #require(try Row.fetchOne(d, sql: "SELECT state, overwrite, etag, uploadedAt FROM object WHERE md5 = ?", arguments: [md5]))
            return (row["state"], row["overwrite"], row["etag"], row["uploadedAt"])
        }
    }

    func listed(_ md5: String, size: Int64 = 100, etag: String? = nil) -> ListedKey {
        ListedKey(key: prefix + md5 + ".dat", size: size, etag: etag ?? md5, lastModified: t0.addingTimeInterval(-86400))
    }

    @Test func aPageMarksWhatTheBucketAlreadyHoldsWithItsSize() async throws {
        try await queued("/p/a.jpg", inode: 1, md5: a)
        try await queued("/p/b.jpg", inode: 2, md5: b)
        try await queued("/p/c.jpg", inode: 3, md5: c)
        var pass = try await db.beginListing(prefix: prefix, keep: [prefix], now: t0)
        // a: same size; b: another size (not these bytes); c: not listed; and a key of another tool.
        let marked = try await db.recordListingPage(&pass, keys: [listed(a), listed(b, size: 7),
                                                                     ListedKey(key: prefix + "IMG_1.jpg", size: 5, etag: "x")],
                                              matchObjects: true, now: t0)
        #expect(marked == 1)
        let (state, _, etag, uploadedAt) = try objectState(a)
        #expect(state == "uploaded" && etag == nil)
        #expect(uploadedAt == t0.addingTimeInterval(-86400).timeIntervalSince1970, "when S3 says it went up")
        #expect(try objectState(b).state == "pending" && objectState(c).state == "pending")
        #expect(try await db.counts().uploaded == 1)
        #expect(try await db.inventoryEntry(key: prefix + "IMG_1.jpg")?.size == 5)
        #expect(try await db.inventoryListing(prefix: prefix)?.seen == 3)
    }

    @Test func anObjectVerifyFoundWrongIsNotTakenForBackedUpByTheNextListing() {
        #expect(ListingReconciliation.isBackedUp(state: .pending, size: 5, overwrite: false, listedSize: 5))
        #expect(ListingReconciliation.isBackedUp(state: .failed, size: 5, overwrite: false, listedSize: 5))
        #expect(!ListingReconciliation.isBackedUp(state: .pending, size: 5, overwrite: true, listedSize: 5))
        #expect(!ListingReconciliation.isBackedUp(state: .uploading, size: 5, overwrite: false, listedSize: 5))
        #expect(!ListingReconciliation.isBackedUp(state: .pending, size: 5, overwrite: false, listedSize: 6))
    }

    @Test func onlyPhotoKeysNameObjects() {
        #expect(ListingReconciliation.md5(ofKey: prefix + a + ".dat", prefix: prefix) == a)
        #expect(ListingReconciliation.md5(ofKey: prefix + a + ".jpg", prefix: prefix) == nil)
        #expect(ListingReconciliation.md5(ofKey: prefix + "aws-0/" + a + ".dat", prefix: prefix) == nil)
        #expect(ListingReconciliation.md5(ofKey: prefix + a.uppercased() + ".dat", prefix: prefix) == nil)
        #expect(ListingReconciliation.md5(ofKey: "photos/V/" + a + ".dat", prefix: prefix) == nil)
    }

    @Test func aCompleteListingForgetsWhatItDidNotSeeButKeepsWhatWasWrittenSince() async throws {
        var first = try await db.beginListing(prefix: prefix, keep: [prefix], now: t0)
        try await db.recordListingPage(&first, keys: [listed(a), listed(b)], matchObjects: true, now: t0)
        _ = try await db.finishListing(first, now: t0)
        #expect(try await db.inventoryListing(prefix: prefix)?.objects == 2)

        let t1 = t0.addingTimeInterval(3600)
        var pass = try await db.beginListing(prefix: prefix, keep: [prefix], now: t1)
        try await db.recordListingPage(&pass, keys: [listed(a)], matchObjects: true, now: t1.addingTimeInterval(1))
        // Uploaded by this daemon while the pass ran (after the page that would have had it).
        try await queued("/p/c.jpg", inode: 3, md5: c)
        try await db.recordUpload(md5: c, key: prefix + c + ".dat", size: 100, etag: c, storageClass: "STANDARD", now: t1.addingTimeInterval(2))
        let (objects, removed, wrote) = try await db.finishListing(pass, now: t1.addingTimeInterval(3))
        #expect(removed == 1 && objects == 2 && wrote)
        #expect(try await db.inventoryPresence(key: prefix + b + ".dat") == .absent)
        #expect(try await db.inventoryEntry(key: prefix + c + ".dat")?.etag == c)
        let listing = try #require(try await db.inventoryListing(prefix: prefix))
        #expect(listing.state == .complete && listing.listedAt == t1.addingTimeInterval(3) && listing.isComplete)
    }

    /// Issue 25 ("disks left asleep"): a pass after a complete one that finds the bucket as
    /// the inventory holds it changes no row, its row included; one key changed, one gone and
    /// one new over several pages are each written, and only they.
    @Test func aPassThatFindsNothingNewWritesNothing() async throws {
        let d = String(repeating: "d", count: 32)
        var first = try await db.beginListing(prefix: prefix, keep: [prefix], now: t0)
        try await db.recordListingPage(&first, keys: [listed(a), listed(b)], matchObjects: true, now: t0)
        try await db.recordListingPage(&first, keys: [listed(c)], matchObjects: true, now: t0)
        #expect(try await db.finishListing(first, now: t0) == (3, 0, true))
        let before = try db.pool.read { try Row.fetchAll($0, sql: "SELECT * FROM inventory ORDER BY key") }
        let listingBefore = try await db.inventoryListing(prefix: prefix)

        let t1 = t0.addingTimeInterval(3600)
        let changes = try await changesCount {
            var pass = try await db.beginListing(prefix: prefix, keep: [prefix], now: t1)
            #expect(pass.quiet)
            try await db.recordListingPage(&pass, keys: [listed(a), listed(b)], matchObjects: true, now: t1)
            try await db.recordListingPage(&pass, keys: [listed(c)], matchObjects: true, now: t1)
            #expect(try await db.finishListing(pass, now: t1) == (3, 0, false))
            #expect(pass.seen == 3 && pass.changed == 0)
        }
        #expect(changes == 0)
        #expect(try db.pool.read { try Row.fetchAll($0, sql: "SELECT * FROM inventory ORDER BY key") } == before)
        #expect(try await db.inventoryListing(prefix: prefix) == listingBefore)

        // b's bytes changed, c is gone (between pages), d is new after the last page's key.
        let t2 = t1.addingTimeInterval(3600)
        var pass = try await db.beginListing(prefix: prefix, keep: [prefix], now: t2)
        try await db.recordListingPage(&pass, keys: [listed(a)], matchObjects: true, now: t2)
        try await db.recordListingPage(&pass, keys: [listed(b, size: 7), listed(d)], matchObjects: true, now: t2)
        #expect(pass.changed == 3 && pass.removed == 1)
        #expect(try await db.finishListing(pass, now: t2) == (3, 1, true))
        #expect(try await db.inventoryEntry(key: prefix + b + ".dat")?.size == 7)
        #expect(try await db.inventoryEntry(key: prefix + a + ".dat")?.seenAt == t0, "an unchanged key keeps its row")
        #expect(try await db.inventoryPresence(key: prefix + c + ".dat") == .absent)
        #expect(try await db.inventoryListing(prefix: prefix)?.listedAt == t2)

        // A key gone after the last page's key is removed at the end, and the end is written.
        var last = try await db.beginListing(prefix: prefix, keep: [prefix], now: t2.addingTimeInterval(60))
        try await db.recordListingPage(&last, keys: [listed(a), listed(b, size: 7)], matchObjects: true, now: t2)
        #expect(try await db.finishListing(last, now: t2.addingTimeInterval(61)) == (2, 1, true))
        #expect(try await db.inventoryPresence(key: prefix + d + ".dat") == .absent)
    }

    /// Rows SQLite changed while `body` ran (sqlite3_total_changes of the writer connection).
    func changesCount(_ body: () async throws -> Void) async throws -> Int {
        let before = try await db.pool.write { $0.totalChangesCount }
        try await body()
        return try await db.pool.write { $0.totalChangesCount } - before
    }

    @Test func presenceIsUnknownUntilAListingOfThePrefixCompleted() async throws {
        let thumb = "thumbnails/U/" + a + ".jpg"
        #expect(try await db.inventoryPresence(key: thumb) == .unknown)
        var pass = try await db.beginListing(prefix: "thumbnails/U/", keep: ["thumbnails/U/"], now: t0)
        #expect(try await db.inventoryPresence(key: thumb) == .unknown)
        try await db.recordListingPage(&pass, keys: [ListedKey(key: thumb, size: 9, etag: "e")], matchObjects: false, now: t0)
        _ = try await db.finishListing(pass, now: t0)
        #expect(try await db.inventoryPresence(key: thumb) == .present(InventoryEntry(key: thumb, size: 9, etag: "e", seenAt: t0)))
        #expect(try await db.inventoryPresence(key: "thumbnails/U/" + b + ".jpg") == .absent)
        // A failed pass later does not make the complete one untrustworthy.
        try await db.listingFailed(prefix: "thumbnails/U/", refused: false, error: "boom", now: t0)
        #expect(try await db.inventoryPresence(key: "thumbnails/U/" + b + ".jpg") == .absent)
        #expect(try await db.inventoryListing(prefix: "thumbnails/U/")?.state == .failed)
    }

    @Test func whatAnotherStageWroteIsPresentBeforeTheNextListing() async throws {
        let thumb = "thumbnails/U/" + a + ".jpg"
        let pass = try await db.beginListing(prefix: "thumbnails/U/", keep: ["thumbnails/U/"], now: t0)
        _ = try await db.finishListing(pass, now: t0)
        #expect(try await db.inventoryPresence(key: thumb) == .absent)
        try await db.recordStored(key: thumb, size: 4000, etag: b, now: t0.addingTimeInterval(1))
        #expect(try await db.inventoryPresence(key: thumb) == .present(InventoryEntry(key: thumb, size: 4000, etag: b, seenAt: t0.addingTimeInterval(1))))
    }

    @Test func anotherUsersInventoryIsForgottenWhenAPassBegins() async throws {
        var old = try await db.beginListing(prefix: "photos/OLD/", keep: ["photos/OLD/"], now: t0)
        try await db.recordListingPage(&old, keys: [ListedKey(key: "photos/OLD/\(a).dat", size: 1, etag: a)],
                                 matchObjects: false, now: t0)
        _ = try await db.beginListing(prefix: prefix, keep: [prefix, "thumbnails/U/"], now: t0)
        #expect(try await db.inventoryEntry(key: "photos/OLD/\(a).dat") == nil)
        #expect(try await db.inventoryListing(prefix: "photos/OLD/") == nil)
    }

    @Test func aRefusalIsRememberedForTheUploader() async throws {
        try await db.listingFailed(prefix: prefix, refused: true, error: "403", now: t0)
        let listing = try #require(try await db.inventoryListing(prefix: prefix))
        #expect(listing.state == .refused && !listing.isComplete && listing.failures == 1 && listing.lastError == "403")
    }

    @Test func anUploadRecordsItsETagAndTime() async throws {
        try await queued("/p/a.jpg", inode: 1, md5: a)
        let job = try #require(try await db.claimObject(now: t0))
        #expect(!job.overwrite)
        try await db.recordUpload(md5: a, key: prefix + a + ".dat", size: 100, etag: "abc-2", storageClass: "DEEP_ARCHIVE", now: t0)
        let (state, _, etag, uploadedAt) = try objectState(a)
        #expect(state == "uploaded" && etag == "abc-2" && uploadedAt == t0.timeIntervalSince1970)
        #expect(try await db.inventoryEntry(key: prefix + a + ".dat")?.storageClass == "DEEP_ARCHIVE")
    }

    @Test func uploadedObjectsComeWithTheirListingAChunkAtATime() async throws {
        for (i, md5) in [a, b, c].enumerated() {
            try await queued("/p/\(i).jpg", inode: UInt64(i + 1), md5: md5)
            try await db.recordUpload(md5: md5, key: prefix + md5 + ".dat", size: 100, etag: md5, storageClass: "STANDARD", now: t0)
        }
        try await db.pool.write { d in try d.execute(sql: "DELETE FROM inventory WHERE key = ?", arguments: [prefix + b + ".dat"]) }
        try await db.pool.write { d in try d.execute(sql: "UPDATE file SET state = 'gone' WHERE md5 = ?", arguments: [c]) }
        let first = try await db.uploadedObjects(keyPrefix: prefix, after: nil, limit: 2)
        #expect(first.map(\.md5) == [a, b])
        #expect(first[0].listed?.etag == a && first[0].expectedETag == a && first[0].hasLiveFile)
        #expect(first[1].listed == nil)
        let second = try await db.uploadedObjects(keyPrefix: prefix, after: b, limit: 2)
        #expect(second.map(\.md5) == [c] && !second[0].hasLiveFile)
    }

    @Test func aRequeuedObjectIsSentAgainUnaskedWhenTheBucketHeldItWrong() async throws {
        try await queued("/p/a.jpg", inode: 1, md5: a)
        try await queued("/p/b.jpg", inode: 2, md5: b)
        for md5 in [a, b] {
            try await db.recordUpload(md5: md5, key: prefix + md5 + ".dat", size: 100, etag: md5, storageClass: "STANDARD", now: t0)
        }
        #expect(try await db.requeue([a], overwrite: true, reason: "wrong bytes", now: t0) == 1)
        #expect(try await db.requeue([b], overwrite: false, reason: "missing", now: t0) == 1)
        #expect(try await db.requeue([b], overwrite: false, reason: "missing", now: t0) == 0, "only what is uploaded goes back")
        let jobs = [try await db.claimObject(now: t0), try await db.claimObject(now: t0)].compactMap { $0 }
        #expect(Set(jobs.map(\.md5)) == [a, b])
        #expect(jobs.first { $0.md5 == a }?.overwrite == true && jobs.first { $0.md5 == b }?.overwrite == false)
        #expect(try await db.listing(failedOnly: false, limit: 10).items.allSatisfy { $0.state == .uploading })
        // Sent again: the flag is spent.
        try await db.recordUpload(md5: a, key: prefix + a + ".dat", size: 100, etag: a, storageClass: "STANDARD", now: t0)
        #expect(try objectState(a).overwrite == false)
    }

    @Test func deepPicksNeverReadObjectsFirstAndSkipsArchiveClasses() async throws {
        for (i, md5) in [a, b, c].enumerated() {
            try await queued("/p/\(i).jpg", inode: UInt64(i + 1), md5: md5)
            try await db.recordUpload(md5: md5, key: prefix + md5 + ".dat", size: 100, etag: md5,
                                storageClass: md5 == c ? "DEEP_ARCHIVE" : "STANDARD", now: t0)
        }
        try await db.markReadBack(md5: a, now: t0)
        #expect(try await db.objectsToReadBack(count: 1, keyPrefix: prefix).map(\.md5) == [b])
        #expect(try await Set(db.objectsToReadBack(count: 5, keyPrefix: prefix).map(\.md5)) == [a, b])
        // Sent again while a verify runs (what its listing found wrong): left to the next one.
        try await db.recordUpload(md5: b, key: prefix + b + ".dat", size: 100, etag: b, storageClass: "STANDARD",
                            now: t0.addingTimeInterval(60))
        #expect(try await db.objectsToReadBack(count: 5, keyPrefix: prefix, uploadedBefore: t0.addingTimeInterval(30)).map(\.md5) == [a])
    }

    @Test func filesAtAPathAndUnderAFolderAPageAtATime() async throws {
        try await queued("/w/2024/a.jpg", inode: 1, md5: a)
        try await queued("/w/2024/b.jpg", inode: 2, md5: b)
        try await queued("/w/2024x/c.jpg", inode: 3, md5: c)
        try await db.recordUpload(md5: a, key: prefix + a + ".dat", size: 100, etag: a, storageClass: "STANDARD", now: t0)
        let one = try await db.files(at: "/w/2024/a.jpg", after: nil, limit: 10)
        #expect(one.count == 1 && one[0].state == .uploaded && one[0].uploadedAt == t0 && one[0].md5 == a)
        let page1 = try await db.files(at: "/w/2024", after: nil, limit: 1)
        #expect(page1.map(\.path) == ["/w/2024/a.jpg"])
        let page2 = try await db.files(at: "/w/2024", after: "/w/2024/a.jpg", limit: 1)
        #expect(page2.map(\.path) == ["/w/2024/b.jpg"] && page2[0].uploadedAt == nil && page2[0].state == .queued)
        #expect(try await db.files(at: "/w/2024", after: "/w/2024/b.jpg", limit: 1).isEmpty, "a sibling folder is not under it")
    }

    @Test func theMigrationGivesObjectsUploadedBeforeItTheirTime() throws {
        // A queue of the release before: objects uploaded then carry their last change as
        // the time they went up, and no ETag of ours (nothing to check it against).
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("queue-v3-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("queue.db").path
        do {
            let old = try DatabasePool(path: path)
            try QueueSchema.migrator.migrate(old, upTo: "v3-photos")
            try old.write { d in
                try d.execute(sql: "INSERT INTO object(md5, size, state, updatedAt) VALUES (?, 100, 'uploaded', 1234), (?, 5, 'pending', 99)",
                              arguments: [a, b])
            }
        }
        let migrated = try QueueDatabase.open(path: path)
        let rows = try migrated.pool.read { d in
            try Row.fetchAll(d, sql: "SELECT md5, uploadedAt, etag, overwrite FROM object ORDER BY md5").map {
                ($0["md5"] as String, $0["uploadedAt"] as Double?, $0["etag"] as String?, $0["overwrite"] as Bool)
            }
        }
        #expect(rows.count == 2)
        #expect(rows[0] == (a, 1234, nil, false))
        #expect(rows[1] == (b, nil, nil, false))
        let names = try migrated.pool.read { d in try String.fetchAll(d, sql: "SELECT identifier FROM grdb_migrations") }
        #expect(names.contains("v4-inventory"))
    }
}
