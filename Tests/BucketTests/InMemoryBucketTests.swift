import BucketTesting
import Digests
import Foundation
import Logging
import NIOCore
import PhotolalaCore
import Synchronization
import Testing
import Bucket

/// The in-memory bucket answers as S3 does, so a stage test against it means something.
@Suite struct InMemoryBucketTests {
    let store = InMemoryBucket()
    let grants = FixedGrants()

    func bucket(_ prefix: String = "p/") async throws -> any Bucket {
        try store.bucket(grant: try await grants.grant(), keyPrefix: prefix, clockOffset: 0, trust: .system)
    }

    @Test func conditionalWritesHoldOrRefuse() async throws {
        let b = try await bucket()
        let first = try await b.putObject(key: "p/pointer", bytes: Array("a".utf8), contentType: "text/plain", ifNoneMatch: true)
        #expect(first == Hex.string(MD5.digest(Array("a".utf8))))
        await #expect(throws: S3Error.self) {
            try await b.putObject(key: "p/pointer", bytes: Array("b".utf8), contentType: "text/plain", ifNoneMatch: true)
        }
        do {
            _ = try await b.putObject(key: "p/pointer", bytes: Array("b".utf8), contentType: "text/plain", ifMatch: "0123")
            Issue.record("another ETag must refuse")
        } catch {
            #expect(error.kind == .preconditionFailed)
        }
        let second = try await b.putObject(key: "p/pointer", bytes: Array("b".utf8), contentType: "text/plain", ifMatch: first)
        #expect(try await b.getObjectIfPresent(key: "p/pointer")?.etag == second)
    }

    @Test func aMultipartUploadsETagIsTheMD5OfItsPartsMD5s() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("imb-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let bytes = (0..<10_000).map { UInt8($0 % 251) }
        let path = dir.appendingPathComponent("f").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let b = try await bucket()
        let id = try await b.createMultipartUpload(key: "p/big", contentType: "application/octet-stream")
        let one = try await b.uploadPart(key: "p/big", uploadId: id, partNumber: 1, path: path, offset: 0, length: 6000)
        let two = try await b.uploadPart(key: "p/big", uploadId: id, partNumber: 2, path: path, offset: 6000, length: 4000)
        #expect(try await b.listParts(key: "p/big", uploadId: id).map(\.partNumber) == [1, 2])
        let etag = try await b.completeMultipartUpload(key: "p/big", uploadId: id, parts: [.init(partNumber: 2, etag: two),
                                                                                        .init(partNumber: 1, etag: one)])
        #expect(etag == ETag.multipart(partMD5s: [MD5.digest(Array(bytes[0..<6000])), MD5.digest(Array(bytes[6000...]))]))
        #expect(ETag.partCount(etag) == 2)
        #expect(store.object("p/big")?.bytes == bytes)
        #expect(store.openUploads == 0)
    }

    @Test func aBodyThatIsNotItsContentMD5IsRefused() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("imb-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("f").path
        try Data("changed".utf8).write(to: URL(fileURLWithPath: path))
        let b = try await bucket()
        do {
            _ = try await b.putObject(key: "p/x", path: path, contentMD5: Data(MD5.digest(Array("original".utf8))).base64EncodedString(),
                                      contentType: "image/jpeg")
            Issue.record("BadDigest expected")
        } catch {
            #expect(error.kind == .contentMismatch && error.code == "BadDigest")
        }
    }

    @Test func listingsComeInPagesInKeyOrder() async throws {
        for i in (0..<25).reversed() { store.store(String(format: "p/%03d", i), bytes: [UInt8(i)]) }
        store.store("q/outside", bytes: [1])
        let b = try await bucket()
        var keys: [String] = []
        var token: String?
        var pages = 0
        repeat {
            let page = try await b.listObjects(prefix: "p/", continuationToken: token, maxKeys: 10)
            keys += page.objects.map(\.key)
            token = page.nextContinuationToken
            pages += 1
        } while token != nil
        #expect(pages == 3)
        #expect(keys == (0..<25).map { String(format: "p/%03d", $0) })
    }

    @Test func rangedReadsStreamTheRange() async throws {
        store.store("p/obj", bytes: Array(0..<200))
        let b = try await bucket()
        let got = Mutex<[UInt8]>([])
        let head = try await b.getObject(key: "p/obj", range: 10...19) { buffer in
            got.withLock { $0 += Array(buffer.readableBytesView) }
        }
        #expect(head.objectSize == 200 && head.contentLength == 10)
        #expect(got.withLock { $0 } == Array(10..<20))
    }

    @Test func archivedObjectsAreAskedBackThenReadable() async throws {
        store.store("p/cold", bytes: [1], storageClass: "DEEP_ARCHIVE")
        let b = try await bucket()
        #expect(try await b.headObject(key: "p/cold")?.needsRestore == true)
        #expect(try await b.restoreObject(key: "p/cold") == .started)
        #expect(try await b.restoreObject(key: "p/cold") == .inProgress)
        store.finishRestore("p/cold")
        #expect(try await b.headObject(key: "p/cold")?.needsRestore == false)
    }
}
