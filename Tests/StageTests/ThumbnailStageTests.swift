import Bucket
import BucketTesting
import Foundation
import GRDB
import PhotolalaCore
import Previews
import Queue
import Synchronization
import Testing
import Thumbnails
import Upload

/// Stands in for the sandboxed worker: a fixed thumbnail and date for every photo.
actor FakeRenderer: PreviewRenderer {
    static let thumbnail: [UInt8] = [0xFF, 0xD8, 0xFF, 0xDB] + Array(repeating: 7, count: 500)
    private(set) var reads: [WorkerMessage.Request] = []

    func read(fd: Int32, _ request: WorkerMessage.Request) async -> PreviewWorkerSlot.Outcome {
        reads.append(request)
        return .read(.init(width: 4000, height: 3000, dateTimeOriginal: "2021:05:01 10:00:00", offsetTimeOriginal: "+00:00",
                           quality: 80, jpeg: request.wantThumbnail ? Self.thumbnail : nil))
    }

    func interrupt() async {}
    func stop() async {}
}

/// The thumbnail actor in-process: photos the upload left `uploaded` get their thumbnail
/// in the bucket and their catalog columns, through an expired token on the way.
@Suite(.serialized) struct ThumbnailStageTests {
    /// A photo backed up as the upload leaves it.
    func uploaded(_ world: StageWorld, _ name: String, _ bytes: [UInt8]) async throws -> String {
        let md5 = try await world.queue(name, bytes)
        _ = try await world.database.claimObject(now: world.clock.now())
        try await world.database.recordUpload(md5: md5, key: world.photoKey(md5), size: Int64(bytes.count), etag: md5,
                                        storageClass: "STANDARD", now: world.clock.now())
        return md5
    }

    func photo(_ world: StageWorld, _ md5: String) async throws -> (state: String, format: String?, takenAt: Int64?)? {
        try await world.database.read { db in
            try Row.fetchOne(db, sql: "SELECT state, format, takenAt FROM photo WHERE md5 = ?", arguments: [md5])
                .map { ($0["state"], $0["format"], $0["takenAt"]) }
        }
    }

    @Test func uploadedPhotosGetThumbnailsAndColumns() async throws {
        let world = try StageWorld()
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0]
        let a = try await uploaded(world, "a.jpg", jpeg + StageWorld.bytes(9_000, seed: 1))
        let b = try await uploaded(world, "b.jpg", jpeg + StageWorld.bytes(5_000, seed: 2))
        let clip = try await uploaded(world, "clip.bin", StageWorld.bytes(3_000, seed: 3))
        // A phone made b's thumbnail already: it is kept.
        let theirs: [UInt8] = [9, 9, 9]
        world.bucket.store("thumbnails/\(world.userId)/\(b).jpg", bytes: theirs)
        // The credentials in hand expire on the way: refreshed, not given up.
        world.bucket.failNext(1, with: .expiredToken, operations: ["PutObject"])

        let renderer = FakeRenderer()
        var settings = Settings()
        settings.catalog.enabled = true
        let service = ThumbnailService(context: world.context(), bucket: world.session(), gate: OpenGate(),
                                       options: .init(settings), renderer: { renderer })
        let running = Running { try await service.run() }
        try await world.waitUntil("every photo read") {
            for md5 in [a, b, clip] where try await photo(world, md5).map({ $0.state != "pending" }) != true { return false }
            return true
        }
        await running.stop()

        let first = try await photo(world, a)
        #expect(first?.state == "ready" && first?.format == "JPEG")
        #expect(try await photo(world, a)?.takenAt == 1_619_863_200)
        #expect(try await photo(world, b)?.state == "ready")
        #expect(try await photo(world, clip)?.state == "skipped")
        let made = try #require(world.bucket.object("thumbnails/\(world.userId)/\(a).jpg"))
        #expect(made.bytes == FakeRenderer.thumbnail && made.contentType == "image/jpeg")
        #expect(world.bucket.object("thumbnails/\(world.userId)/\(b).jpg")?.bytes == theirs)
        // Only what had no thumbnail asked for one; the renderer never saw the non-photo.
        #expect(await renderer.reads.map(\.wantThumbnail).sorted { !$0 && $1 } == [false, true])
        #expect(await world.grants.rejections == 1)
        var status = DaemonStatus()
        await service.contribute(to: &status)
        #expect(status.thumbnails.done == 2 && status.thumbnails.pending == 0 && status.thumbnails.failed == 0)
    }
}
