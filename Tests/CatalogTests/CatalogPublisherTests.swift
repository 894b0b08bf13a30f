import Foundation
import GRDB
import Logging
import Synchronization
import Testing
import Catalog
import Queue

/// One sync's logic against a bucket in memory and a real queue database: the merge
/// rules, races, stores that refuse conditions, catalogs that cannot be read.
@Suite struct CatalogPublisherTests {
    let user = "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"

    func publisher(_ queue: TestQueue, _ bucket: MemoryBucket) -> CatalogPublisher {
        CatalogPublisher(store: bucket.store, workspace: queue.workspace,
                         database: queue.database, logger: Logger(label: "test"))
    }

    func sync(_ queue: TestQueue, _ bucket: MemoryBucket, _ ledger: inout CatalogLedger,
              publisher: CatalogPublisher? = nil) async throws -> (SyncOutcome, CatalogPublisher) {
        var p = publisher ?? self.publisher(queue, bucket)
        let outcome = try await p.sync(ledger: &ledger, pending: try queue.database.catalogPending())
        return (outcome, p)
    }

    @Test func aFirstPublishCreatesTheCatalogNewestFirstAndRecordsItsRows() async throws {
        let queue = try TestQueue()
        let bucket = MemoryBucket(userId: user)
        let ours = [photo("a", date: 100), photo("b", date: 300, format: "HEIF"), photo("c", date: 200, format: "RAW-DNG")]
        try queue.add(ours)
        try queue.add([photo("not yet", date: 500)], state: "pending")
        #expect(try await queue.database.catalogPending() == 3)
        var ledger = CatalogLedger()
        let (outcome, _) = try await sync(queue, bucket, &ledger)
        guard case .published(let report) = outcome else { Issue.record("\(outcome)"); return }
        #expect(report.added == 3 && report.rows == 3 && report.total == 3)

        let view = try #require(try await appView(bucket, user))
        #expect(view.lines == [ours[1].line, ours[2].line, ours[0].line])
        #expect(bucket.pointerWrites == [.ifNoneMatch], "no pointer yet: If-None-Match: *")
        #expect(report.pointer?.md5 == view.md5 && ledger.pointer == report.pointer)
        for row in ours { #expect(try queue.catalogColumn(row.md5) == "listed") }
        #expect(try queue.catalogColumn(md5Hex("not yet")) == nil)
        #expect(try await queue.database.catalogPending() == 0 && ledger.rows == 3 && ledger.publishedAt != nil)
        let stored = await CatalogLedger(settings: try queue.database.settings(prefix: CatalogLedger.prefix))
        #expect(stored.pointer == ledger.pointer && stored.rows == 3, "recorded with the rows, in one transaction")
        #expect(FileManager.default.fileExists(atPath: queue.workspace.nextPath), "the caller clears the workspace")
    }

    @Test func everyRowAlreadyThereStaysByteForByteWhateverItLooksLike() async throws {
        let queue = try TestQueue()
        let bucket = MemoryBucket(userId: user)
        let same = photo("shared", date: 250)
        try queue.add([photo("x", date: 260), same, photo("y", date: 10)])
        // Another device's catalog, not sorted, with the oddities other writers leave:
        // a 4-column row, an empty MD5, an unparsable date, spaces, CRLF, a blank line, no
        // final newline, our own photo already listed (by photo_md5) with other columns.
        let odd = [
            theirs("t1", date: 100),
            "\(md5Hex("h2")),5,,270,PNG",
            theirs("t3", date: 300) + "\r",
            "\(md5Hex("h4")), 7 ,\(md5Hex("t4")),  280 ,JPEG",
            "\(md5Hex("h5")),9,\(md5Hex("t5")),1699999999",
            "",
            "\(md5Hex("h6")),9,\(md5Hex("t6")),someday,GIF",
            "\(md5Hex("edited by the app")),999,\(same.md5),251,JPEG",
        ]
        let body = CatalogFormat.header + "\n" + odd.joined(separator: "\n")
        let md5 = md5Hex(body)
        bucket.put(CatalogFormat.snapshotKey(userId: user, md5: md5), body)
        bucket.put(CatalogFormat.pointerKey(userId: user), md5 + "\n")

        var ledger = CatalogLedger()
        let (outcome, _) = try await sync(queue, bucket, &ledger)
        guard case .published(let report) = outcome else { Issue.record("\(outcome)"); return }
        #expect(report.added == 2 && report.rows == 3 && report.total == 9)
        let view = try #require(try await appView(bucket, user))
        #expect(view.isNewestFirst)
        let kept = odd.filter { !$0.isEmpty }.map { $0.hasSuffix("\r") ? String($0.dropLast()) : $0 }
        #expect(Set(view.lines) == Set(kept + [photo("x", date: 260).line, photo("y", date: 10).line]))
        #expect(view.lines.count == 9, "the shared photo was not added twice")
        #expect(view.lines.last == "\(md5Hex("h6")),9,\(md5Hex("t6")),someday,GIF", "undated last")
        #expect(try queue.catalogColumn(same.md5) == "listed", "listed by the app's row")
        #expect(bucket.pointerWrites == [.ifMatch(md5Hex(md5 + "\n"))])
    }

    @Test func nothingWaitingAndThePointerAsLastSeenCostsNoDownload() async throws {
        let queue = try TestQueue()
        let bucket = MemoryBucket(userId: user)
        try queue.add([photo("a", date: 1)])
        var ledger = CatalogLedger()
        _ = try await sync(queue, bucket, &ledger)
        bucket.memory.remove(CatalogFormat.snapshotKey(userId: user, md5: ledger.pointer!.md5))
        let (again, _) = try await sync(queue, bucket, &ledger)
        #expect(again == .unchanged, "a download would have found the snapshot gone")
    }

    @Test func noCatalogAndNothingToPublishIsNothingToDo() async throws {
        let queue = try TestQueue()
        var ledger = CatalogLedger()
        let (outcome, _) = try await sync(queue, MemoryBucket(userId: user), &ledger)
        #expect(outcome == .unchanged)
    }

    @Test func rowsOfOursAnAppDroppedComeBackAndTheirsStay() async throws {
        let queue = try TestQueue()
        let bucket = MemoryBucket(userId: user)
        let ours = [photo("a", date: 10), photo("b", date: 20), photo("c", date: 30)]
        try queue.add(ours)
        for row in ours { bucket.put(CatalogFormat.photoKey(userId: user, md5: row.md5), "photo") }
        var ledger = CatalogLedger()
        _ = try await sync(queue, bucket, &ledger)
        // An app rewrites the catalog from its older copy: its own rows, none of ours.
        bucket.publishAsAnApp(lines: [theirs("p", date: 25), theirs("q", date: 5)])
        let (outcome, _) = try await sync(queue, bucket, &ledger)
        guard case .published(let report) = outcome else { Issue.record("\(outcome)"); return }
        #expect(report.added == 3 && report.withdrawn == 0)
        let view = try #require(try await appView(bucket, user))
        #expect(view.lines == [ours[2].line, theirs("p", date: 25), ours[1].line, ours[0].line, theirs("q", date: 5)])
        #expect(bucket.photoHeads == 3, "one HEAD per dropped row")
    }

    @Test func aRowAnAppRemovedWithItsPhotoStaysOut() async throws {
        let queue = try TestQueue()
        let bucket = MemoryBucket(userId: user)
        let ours = [photo("kept", date: 10), photo("unstarred", date: 20)]
        try queue.add(ours)
        bucket.put(CatalogFormat.photoKey(userId: user, md5: ours[0].md5), "photo")
        var ledger = CatalogLedger()
        _ = try await sync(queue, bucket, &ledger)
        // The app unstars: deletes the photo, then publishes without its row.
        bucket.publishAsAnApp(lines: [ours[0].line])
        let (outcome, _) = try await sync(queue, bucket, &ledger)
        guard case .current(let report) = outcome else { Issue.record("\(outcome)"); return }
        #expect(report.withdrawn == 1 && report.rows == 1)
        #expect(try queue.catalogColumn(ours[1].md5) == "withdrawn")
        #expect(try await queue.database.catalogPending() == 0)
        #expect(try #require(try await appView(bucket, user)).lines == [ours[0].line])
    }

    @Test func manyDroppedRowsAreCheckedAgainstOneListing() async throws {
        let queue = try TestQueue()
        let bucket = MemoryBucket(userId: user)
        let ours = (0..<6).map { photo("p\($0)", date: Int64($0)) }
        try queue.add(ours)
        for row in ours.dropFirst(2) { bucket.put(CatalogFormat.photoKey(userId: user, md5: row.md5), "photo") }
        var ledger = CatalogLedger()
        var p = publisher(queue, bucket)
        p.headLimit = 2
        _ = try await sync(queue, bucket, &ledger, publisher: p)
        bucket.publishAsAnApp(lines: [])
        let (outcome, _) = try await sync(queue, bucket, &ledger, publisher: p)
        guard case .published(let report) = outcome else { Issue.record("\(outcome)"); return }
        #expect(report.withdrawn == 2 && report.added == 4)
        #expect(bucket.photoHeads == 0, "listed, not HEAD one by one")
        #expect(try #require(try await appView(bucket, user)).md5s == ours.dropFirst(2).reversed().map(\.md5))
    }

    @Test func anotherPublishBetweenOurReadAndWriteIsMergedNotOverwritten() async throws {
        let queue = try TestQueue()
        let bucket = MemoryBucket(userId: user)
        try queue.add([photo("ours", date: 50)])
        bucket.publishAsAnApp(lines: [theirs("first", date: 40)])
        let once = Flag()
        bucket.beforePointerWrite {
            if once.take() { bucket.publishAsAnApp(lines: [theirs("first", date: 40), theirs("racer", date: 60)]) }
        }
        var ledger = CatalogLedger()
        let (outcome, _) = try await sync(queue, bucket, &ledger)
        guard case .published = outcome else { Issue.record("\(outcome)"); return }
        let view = try #require(try await appView(bucket, user))
        #expect(view.lines == [theirs("racer", date: 60), photo("ours", date: 50).line, theirs("first", date: 40)])
        let writes = bucket.pointerWrites
        #expect(writes.count == 2 && writes.allSatisfy { if case .ifMatch = $0 { true } else { false } })
    }

    @Test func losingEveryRaceGivesUpWithoutADanglingPointer() async throws {
        let queue = try TestQueue()
        let bucket = MemoryBucket(userId: user)
        try queue.add([photo("ours", date: 50)])
        let counter = Counter()
        bucket.beforePointerWrite {
            bucket.publishAsAnApp(lines: [theirs("n\(counter.next())", date: 1)])
        }
        var ledger = CatalogLedger()
        var p = publisher(queue, bucket)
        p.maximumRounds = 3
        let (outcome, _) = try await sync(queue, bucket, &ledger, publisher: p)
        #expect(outcome == .contended(rounds: 3))
        #expect(try #require(try await appView(bucket, user)).lines.count == 1, "the racer's catalog, readable")
        #expect(try await queue.database.catalogPending() == 1, "ours still waits")
    }

    @Test func aStoreThatRefusesConditionsThatHoldGetsWriteAndReadBack() async throws {
        let queue = try TestQueue()
        let bucket = MemoryBucket(userId: user)
        try queue.add([photo("a", date: 5)])
        bucket.publishAsAnApp(lines: [theirs("t", date: 1)])
        bucket.refuseConditions()
        var ledger = CatalogLedger()
        let (outcome, p) = try await sync(queue, bucket, &ledger)
        guard case .published = outcome else { Issue.record("\(outcome)"); return }
        #expect(!p.conditionalWrites)
        #expect(bucket.pointerWrites.count == 2, "one refused If-Match, then one plain write: no loop")
        #expect(try #require(try await appView(bucket, user)).lines == [photo("a", date: 5).line, theirs("t", date: 1)])
        // Next time it goes straight to the fallback.
        try queue.add([photo("b", date: 9)])
        let (second, _) = try await sync(queue, bucket, &ledger, publisher: p)
        guard case .published = second else { Issue.record("\(second)"); return }
        #expect(bucket.pointerWrites.suffix(1) == [.unconditional])
    }

    @Test func aCatalogThatCannotBeReadBlocksPublishingAndIsLeftAsItIs() async throws {
        let queue = try TestQueue()
        try queue.add([photo("a", date: 5)])
        let pointerKey = CatalogFormat.pointerKey(userId: user)
        let missing = md5Hex("never uploaded")
        let cases: [(String, @Sendable (MemoryBucket) -> Void)] = [
            ("not in the bucket", { $0.put(pointerKey, missing) }),
            ("damaged", { b in
                b.put(pointerKey, missing)
                b.put(CatalogFormat.snapshotKey(userId: self.user, md5: missing), CatalogFormat.header + "\nshort\n")
            }),
            ("not a snapshot's MD5", { $0.put(pointerKey, "<html>oops</html>") }),
        ]
        for (why, prepare) in cases {
            let bucket = MemoryBucket(userId: user)
            prepare(bucket)
            let before = bucket.objects
            var ledger = CatalogLedger()
            let (outcome, _) = try await sync(queue, bucket, &ledger)
            guard case .blocked(let reason) = outcome else { Issue.record("\(why): \(outcome)"); continue }
            #expect(reason.contains(why) && reason.contains("publishes nothing"), "\(reason)")
            #expect(bucket.objects == before, "nothing written over it")
        }
        #expect(try await queue.database.catalogPending() == 1)
    }

    @Test func readyRowsTheAppsCouldNotReadAreLeftOutAndNoLongerWait() async throws {
        let queue = try TestQueue()
        let bucket = MemoryBucket(userId: user)
        try queue.add([photo("good", date: 2), photo("video", date: 3, format: "MOV")])
        try queue.add([photo("undated", date: 4)])
        try queue.execute("UPDATE photo SET takenAt = NULL WHERE md5 = '\(md5Hex("undated"))'")
        var ledger = CatalogLedger()
        let (outcome, _) = try await sync(queue, bucket, &ledger)
        guard case .published(let report) = outcome else { Issue.record("\(outcome)"); return }
        #expect(report.added == 1 && report.rejected == 2 && report.firstRejection != nil)
        #expect(try #require(try await appView(bucket, user)).lines == [photo("good", date: 2).line])
        #expect(try queue.catalogColumn(md5Hex("video")) == "rejected")
        #expect(try await queue.database.catalogPending() == 0)
    }

    @Test func aPhotoAnotherDeviceAlreadyListedIsNotAddedWhenItsThumbnailIsDone() async throws {
        let queue = try TestQueue()
        let bucket = MemoryBucket(userId: user)
        let shared = photo("from the phone too", date: 7)
        try queue.add([shared], state: "pending")
        bucket.publishAsAnApp(lines: [shared.line])
        try queue.add([photo("other", date: 1)])
        var ledger = CatalogLedger()
        _ = try await sync(queue, bucket, &ledger)
        try queue.execute("UPDATE photo SET state = 'ready' WHERE md5 = '\(shared.md5)'")
        #expect(try await queue.database.catalogPending() == 0)
        #expect(try #require(try await appView(bucket, user)).md5s == [shared.md5, md5Hex("other")])
    }

    @Test func ourRowsAreReadInTheIndexsOrderWithoutASortInMemory() throws {
        let queue = try TestQueue()
        try queue.workspace.reset()
        let scratch = try queue.workspace.openScratch(queuePath: queue.database.path)
        let plan = try scratch.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN SELECT p.md5 " + SnapshotBuilder.oursToAdd + " ORDER BY p.takenAt DESC, p.md5 DESC")
                .map { $0["detail"] as String }.joined(separator: "; ")
        }
        #expect(!plan.contains("TEMP B-TREE"), "\(plan)")
    }
}
