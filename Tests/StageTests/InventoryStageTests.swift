import Bucket
import BucketTesting
import Foundation
import PhotolalaCore
import Queue
import Testing
import Inventory
import Upload

/// The inventory actor in-process: it lists the in-memory bucket, finds what is already
/// there, and puts back what the bucket lost.
@Suite(.serialized) struct InventoryStageTests {
    func inventory(_ world: StageWorld, statusChanges: ChangeFeed = ChangeFeed(), audit: CollectedAudit? = nil) async -> InventoryService {
        var settings = Settings()
        settings.upload.inventoryInterval = .seconds(3600)
        return await InventoryService(context: world.context(statusChanges: statusChanges, audit: audit), bucket: world.session(),
                                gate: OpenGate(), options: .init(settings))
    }

    func status(_ service: InventoryService) async -> DaemonStatus {
        var s = DaemonStatus()
        await service.contribute(to: &s)
        return s
    }

    @Test func aListingFindsObjectsAlreadyThereAndSendsBackWhatTheBucketLost() async throws {
        let world = try StageWorld(skipsWaitsUpTo: 60)
        // Backed up by this NAS earlier, and gone from the bucket since.
        let lost = try await world.queue("lost.jpg", StageWorld.bytes(6_000, seed: 2))
        let job = try #require(try await world.database.claimObject(now: world.clock.now()))
        #expect(job.md5 == lost)
        try await world.database.recordUpload(md5: lost, key: world.photoKey(lost), size: 6_000, etag: lost, storageClass: "STANDARD",
                                        now: world.clock.now())
        // Waiting to be sent, but a phone already put these bytes there.
        let there = StageWorld.bytes(5_000, seed: 1)
        let waiting = try await world.queue("there.jpg", there)
        world.bucket.store(world.photoKey(waiting), bytes: there)
        // Many more keys than a page holds, some of them thumbnails.
        for i in 0..<1_200 { world.bucket.store("photos/\(world.userId)/other-\(i).dat", bytes: [UInt8(i % 256)]) }
        world.bucket.store("thumbnails/\(world.userId)/\(waiting).jpg", bytes: [1, 2, 3])
        world.clock.advance(by: 1)

        let service = await inventory(world)
        let running = Running { try await service.run() }
        try await world.waitUntil("the listing to complete") { await status(service).inventory.state == .ok }
        try await world.waitUntil("the thumbnails to be listed") {
            try await world.database.inventoryListing(prefix: "thumbnails/\(world.userId)/")?.isComplete == true
        }
        #expect(try await world.objectState(waiting) == "uploaded", "found in the bucket: nothing to send")
        #expect(try await world.objectState(lost) == "pending", "lost by the bucket: sent again")
        #expect(world.bucket.requests("ListObjectsV2") >= 3)
        let s = await status(service)
        #expect(s.inventory.objects == 1_202)
        #expect(s.inventory.nextListingAt != nil)
        // Nothing more until the interval is over.
        let listings = world.bucket.requests("ListObjectsV2")
        try await Task.sleep(for: .milliseconds(200))
        #expect(world.bucket.requests("ListObjectsV2") == listings)
        await running.stop()
    }

    @Test func verifyDeepReadsObjectsBackThroughShort503s() async throws {
        let world = try StageWorld(skipsWaitsUpTo: 60)
        var md5s: [String] = []
        for i in 0..<4 {
            let bytes = StageWorld.bytes(3_000 + i, seed: 10 + i)
            let md5 = try await world.queue("p\(i).jpg", bytes)
            _ = try await world.database.claimObject(now: world.clock.now())
            try await world.database.recordUpload(md5: md5, key: world.photoKey(md5), size: Int64(bytes.count), etag: md5,
                                            storageClass: "STANDARD", now: world.clock.now())
            world.bucket.store(world.photoKey(md5), bytes: i == 3 ? Array(bytes.reversed()) : bytes)
            md5s.append(md5)
        }
        world.clock.advance(by: 1)
        let audit = CollectedAudit()
        let service = await inventory(world, audit: audit)
        let running = Running { try await service.run() }
        try await world.waitUntil("the first listing") { await status(service).inventory.state == .ok }
        // Fewer failures than the inventory's budget retries in place.
        world.bucket.failNext(3, with: .slowDown, operations: ["GetObject"])
        _ = await service.requestVerify(deepPercent: 100, by: .caller(uid: 34))
        try await world.waitUntil("verify done") { await service.verifyProgress().isFinished }
        let result = await service.verifyProgress().result
        // The listing's ETag already told the wrong one; the others read back whole.
        #expect(result.wrongETag == 1 && result.requeued == 1)
        #expect(result.readBack == 3 && result.readBackWrong == 0 && result.lastError == nil)
        #expect(try await world.objectState(md5s[3]) == "pending", "the wrong bytes are sent again")
        #expect(world.bucket.requests("GetObject") == 3 + 3)
        // Who asked, and the result, in the audit trail; the periodic listing is not there.
        #expect(audit.all == [
            AuditEvent(.verify, by: .caller(uid: 34), .ok, ["step": "started", "deep": "100%"]),
            AuditEvent(.verify, by: .caller(uid: 34), .ok, ["step": "finished", "checked": 4, "missing": 0, "mismatched": 1,
                                                            "readBack": 3, "requeued": 1]),
        ])
        await running.stop()
    }
}
