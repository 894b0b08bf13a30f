import Bucket
import BucketTesting
import Digests
import Foundation
import PhotolalaCore
import Queue
import Testing
import Upload

/// The uploader actor in-process against the in-memory bucket: what it sends arrives
/// whole, under the key its MD5 names, whatever the bucket answers on the way.
@Suite(.serialized) struct UploaderStageTests {
    func uploader(_ world: StageWorld, rates: BandwidthFeed = BandwidthFeed(),
                  configure: (inout Settings) -> Void = { _ in }) -> UploaderService {
        var settings = Settings()
        settings.upload.concurrency = 3
        // 6 MiB and up go in 5 MiB parts.
        settings.upload.multipartThreshold = 6 << 20
        settings.upload.partSize = 5 << 20
        configure(&settings)
        return UploaderService(context: world.context(), bucket: world.session(), gate: OpenGate(), options: .init(settings),
                               rates: rates)
    }

    /// Every object `uploaded`, and in the bucket with bytes whose MD5 is its key's.
    func expectUploaded(_ md5s: [String], in world: StageWorld) async throws {
        for md5 in md5s {
            #expect(try await world.objectState(md5) == "uploaded")
            let object = try #require(world.bucket.object(world.photoKey(md5)), "\(md5) is not in the bucket")
            #expect(Hex.string(MD5.digest(object.bytes)) == md5)
            #expect(object.metadata["original-format"] != nil)
        }
    }

    @Test func everyObjectArrivesThroughA503Storm() async throws {
        let world = try StageWorld()
        var md5s: [String] = []
        for i in 0..<8 { await md5s.append(try world.queue("photo\(i).jpg", StageWorld.bytes(20_000 + i * 3_000, seed: i))) }
        await md5s.append(try world.queue("video.mov", StageWorld.bytes(12 << 20, seed: 99)))
        // More failures than any request retries in place: objects go back to the queue and
        // the whole pool backs off before S3 answers again.
        world.bucket.failNext(25, with: .slowDown)
        let service = uploader(world)
        let running = Running { try await service.run() }
        try await world.waitUntil("every object uploaded") {
            for md5 in md5s where try await world.objectState(md5) != "uploaded" { return false }
            return true
        }
        await running.stop()
        try await expectUploaded(md5s, in: world)
        // The video went up in parts: its ETag is S3's multipart one.
        #expect(ETag.partCount(try #require(world.bucket.object(world.photoKey(md5s.last!))).etag) == 3)
        #expect(world.bucket.requests("PutObject") + world.bucket.requests("UploadPart") > md5s.count)
        #expect(world.bucket.openUploads == 0)
        var status = DaemonStatus()
        await service.contribute(to: &status)
        #expect(status.s3?.state == .ok)
    }

    @Test func anExpiredGrantIsRefreshedAndTheUploadsGoOn() async throws {
        let world = try StageWorld()
        let first = try await world.queue("first.jpg", StageWorld.bytes(10_000, seed: 1))
        let service = uploader(world)
        let running = Running { try await service.run() }
        try await world.waitUntil("the first object uploaded") { try await world.objectState(first) == "uploaded" }
        // The credentials in hand expire: S3 refuses them from now on.
        world.bucket.expireTokensSeenSoFar()
        let later = await [try world.queue("second.jpg", StageWorld.bytes(30_000, seed: 2)),
                     try world.queue("third.mov", StageWorld.bytes(7 << 20, seed: 3))]
        try await world.waitUntil("the later objects uploaded") {
            for md5 in later where try await world.objectState(md5) != "uploaded" { return false }
            return true
        }
        await running.stop()
        try await expectUploaded([first] + later, in: world)
        #expect(await world.grants.rejections >= 1)
        #expect(await world.grants.issued == 1 + world.grants.rejections)
    }

    @Test func anObjectAlreadyInTheBucketIsNotSentAgain() async throws {
        let world = try StageWorld()
        let bytes = StageWorld.bytes(40_000, seed: 7)
        let md5 = try await world.queue("there.jpg", bytes)
        // Another device put these bytes there: a HEAD (no listing yet) finds them.
        world.bucket.store(world.photoKey(md5), bytes: bytes)
        let service = uploader(world)
        let running = Running { try await service.run() }
        try await world.waitUntil("the object marked uploaded") { try await world.objectState(md5) == "uploaded" }
        await running.stop()
        #expect(world.bucket.requests("PutObject") == 0)
        #expect(world.bucket.requests("HeadObject") >= 1)
    }

    /// config.md "Bandwidth timetable": the uploader reads the rate the daemon's schedule
    /// publishes. A `0` slot holds every upload (not even a HEAD goes out); the next slot
    /// lets them go at once, at its rate.
    @Test func aZeroSlotHoldsUploadsAndTheNextSlotsRateApplies() async throws {
        let world = try StageWorld()
        let rates = BandwidthFeed(.init(rate: .paused, until: Date().addingTimeInterval(60), scheduled: true))
        let md5 = try await world.queue("evening.jpg", StageWorld.bytes(200_000, seed: 5))
        let service = uploader(world, rates: rates)
        let running = Running { try await service.run() }
        try await Task.sleep(for: .seconds(1))
        #expect(try await world.objectState(md5) == "pending")
        #expect(world.bucket.requests("PutObject") + world.bucket.requests("HeadObject") == 0)

        // 64 KiB/s with at most a second's worth at once: 200,000 bytes take over 2 s.
        let started = ContinuousClock.now
        rates.publish(.init(rate: .limit(64 << 10), until: Date().addingTimeInterval(60), scheduled: true))
        try await world.waitUntil("the object uploaded in the next slot", timeout: 30) { try await world.objectState(md5) == "uploaded" }
        let took = ContinuousClock.now - started
        await running.stop()
        #expect(took >= .milliseconds(1500), "sent at the slot's rate, not at once: \(took)")
        try await expectUploaded([md5], in: world)
    }
}
