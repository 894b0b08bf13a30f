#if canImport(Glibc)
import Glibc
#endif
import CoreMetrics
import Foundation
import MetricsTestKit
import Testing
@testable import Bucket
import Digests
import PhotolalaCore

@Suite("S3 client against moto_server", .serialized,
       .enabled(if: MotoServer.executable != nil, "moto_server is not on PATH: install moto[server] to run these"))
struct S3ClientMotoTests {
    let bucket = "photolala"
    let userPrefix = "photos/550e8400-e29b-41d4-a716-446655440000/"

    @Test("put, head, multipart with ListParts mid-way, complete, read back, abort; errors classified")
    func roundTrip() async throws {
        let moto = try await MotoServer.start()
        defer { moto.stop() }
        let client = try S3Client(configuration: .init(bucket: bucket, region: "us-east-1", endpoint: moto.endpoint))
        defer { Task { try? await client.shutdown() } }
        let credentials = try await moto.setUpAuthenticatedBucket(bucket, allowedPrefix: "photos/", client: client)
        #expect(credentials.accessKeyId.hasPrefix("ASIA"))
        #expect(credentials.sessionToken != nil)
        let directory = try TemporaryDirectory()

        // A small photo: one PUT, then HEAD finds it with its size and MD5.
        let photo = directory.file("photo.jpg", contents: randomBytes(100_000))
        let digest = try S3Client.digestFileRange(path: photo)
        let photoKey = userPrefix + digest.md5Hex + ".dat"
        let etag = try await client.putObject(key: photoKey, path: photo, contentMD5: digest.contentMD5,
                                              contentType: "image/jpeg", metadata: ["original-format": "JPEG"],
                                              credentials: credentials)
        #expect(etag == digest.md5Hex)
        var info = try #require(try await client.headObject(key: photoKey, credentials: credentials))
        // S3's own time of the write (a replay is a new PUT: issue 31), to the second.
        let written = try #require(info.lastModified)
        #expect(abs(written.timeIntervalSinceNow) < 300, "\(written)")
        info.lastModified = nil
        #expect(info == S3Client.ObjectInfo(size: 100_000, etag: digest.md5Hex, contentType: "image/jpeg", originalFormat: "JPEG"))
        #expect(try await client.headObject(key: userPrefix + "missing.dat", credentials: credentials) == nil)
        try #expect(md5(of: await client.getObject(key: photoKey, credentials: credentials), in: directory)
            == digest.md5Hex)

        // A range of a file, with a key that needs encoding (moto's own signature check
        // mishandles most other characters; they are checked with authentication off below).
        let rangeDigest = try S3Client.digestFileRange(path: photo, offset: 1000, length: 5000)
        let spacedKey = userPrefix + "a b ?#.dat"
        _ = try await client.putObject(key: spacedKey, path: photo, offset: 1000, length: 5000,
                                       contentMD5: rangeDigest.contentMD5, contentType: "application/octet-stream",
                                       storageClass: "STANDARD_IA", credentials: credentials)
        #expect(try await client.headObject(key: spacedKey, credentials: credentials)?.size == 5000)
        try #expect(md5(of: await client.getObject(key: spacedKey, credentials: credentials), in: directory)
            == rangeDigest.md5Hex)
        let empty = directory.file("empty", contents: [])
        _ = try await client.putObject(key: userPrefix + "empty.dat", path: empty,
                                       contentMD5: S3Client.contentMD5(hex: "d41d8cd98f00b204e9800998ecf8427e")!,
                                       contentType: "image/png", credentials: credentials)
        #expect(try await client.headObject(key: userPrefix + "empty.dat", credentials: credentials)?.size == 0)

        // A 12 MiB video in 5 MiB parts, resumed from ListParts as a restarted daemon would.
        let partSize: Int64 = 5 << 20
        let video = directory.file("video.mov", contents: randomBytes(12 << 20))
        let videoDigest = try S3Client.digestFileRange(path: video)
        let videoKey = userPrefix + videoDigest.md5Hex + ".dat"
        let uploadId = try await client.createMultipartUpload(key: videoKey, contentType: "video/quicktime",
                                                              metadata: ["original-format": "MOV"],
                                                              credentials: credentials)
        let firstETag = try await client.uploadPart(key: videoKey, uploadId: uploadId, partNumber: 1, path: video,
                                                    offset: 0, length: partSize, credentials: credentials)
        let secondDigest = try S3Client.digestFileRange(path: video, offset: partSize, length: partSize, sha256: true)
        let secondETag = try await client.uploadPart(key: videoKey, uploadId: uploadId, partNumber: 2, path: video,
                                                     offset: partSize, length: partSize,
                                                     contentMD5: secondDigest.contentMD5,
                                                     payloadSHA256: secondDigest.sha256Hex, credentials: credentials)
        #expect(secondETag == secondDigest.md5Hex)
        let midway = try await client.listParts(key: videoKey, uploadId: uploadId, credentials: credentials)
        #expect(midway == [S3Client.Part(partNumber: 1, etag: firstETag, size: partSize),
                           S3Client.Part(partNumber: 2, etag: secondETag, size: partSize)])
        // One part a page: pagination is followed to the end.
        #expect(try await client.listParts(key: videoKey, uploadId: uploadId, pageSize: 1, credentials: credentials)
            == midway)
        #expect(try await client.headObject(key: videoKey, credentials: credentials) == nil,
                "nothing appears under the key before completion")
        let lastETag = try await client.uploadPart(key: videoKey, uploadId: uploadId, partNumber: 3, path: video,
                                                   offset: 2 * partSize, length: (12 << 20) - 2 * partSize,
                                                   credentials: credentials)
        let finalETag = try await client.completeMultipartUpload(
            key: videoKey, uploadId: uploadId,
            parts: midway.reversed() + [S3Client.Part(partNumber: 3, etag: lastETag)], credentials: credentials)
        #expect(finalETag.hasSuffix("-3"))
        #expect(try await client.headObject(key: videoKey, credentials: credentials)?.size == 12 << 20)
        try #expect(md5(of: await client.getObject(key: videoKey, credentials: credentials), in: directory)
            == videoDigest.md5Hex)

        // Abort: the upload and its parts are gone; aborting twice is fine.
        let abandoned = try await client.createMultipartUpload(key: userPrefix + "abandoned.dat",
                                                               contentType: "video/mp4", credentials: credentials)
        _ = try await client.uploadPart(key: userPrefix + "abandoned.dat", uploadId: abandoned, partNumber: 1,
                                        path: photo, offset: 0, length: 100_000, credentials: credentials)
        try await client.abortMultipartUpload(key: userPrefix + "abandoned.dat", uploadId: abandoned,
                                              credentials: credentials)
        await #expect(throws: S3Error.self) {
            try await client.listParts(key: self.userPrefix + "abandoned.dat", uploadId: abandoned, credentials: credentials)
        }
        do {
            _ = try await client.listParts(key: userPrefix + "abandoned.dat", uploadId: abandoned, credentials: credentials)
        } catch {
            #expect(error.kind == .notFound)
            #expect(error.code == "NoSuchUpload")
        }
        try await client.abortMultipartUpload(key: userPrefix + "abandoned.dat", uploadId: abandoned,
                                              credentials: credentials)

        // Completing with a wrong ETag is permanent.
        let broken = try await client.createMultipartUpload(key: userPrefix + "broken.dat", contentType: "image/png",
                                                            credentials: credentials)
        await expectError(.permanent) {
            _ = try await client.completeMultipartUpload(
                key: self.userPrefix + "broken.dat", uploadId: broken,
                parts: [S3Client.Part(partNumber: 1, etag: "0123456789abcdef0123456789abcdef")], credentials: credentials)
        }
        try await client.abortMultipartUpload(key: userPrefix + "broken.dat", uploadId: broken, credentials: credentials)

        // What moto's signature and policy checks answer, classified.
        var wrongSecret = credentials
        wrongSecret.secretAccessKey += "x"
        await expectError(.permanent, code: "SignatureDoesNotMatch") {
            _ = try await client.putObject(key: photoKey, path: photo, contentMD5: digest.contentMD5,
                                           contentType: "image/jpeg", credentials: wrongSecret)
        }
        var wrongToken = credentials
        wrongToken.sessionToken = "not-the-token"
        await expectError(.credentialsExpired) {
            _ = try await client.putObject(key: photoKey, path: photo, contentMD5: digest.contentMD5,
                                           contentType: "image/jpeg", credentials: wrongToken)
        }
        await expectError(.forbidden, code: "AccessDenied") {
            _ = try await client.putObject(key: "thumbnails/elsewhere.dat", path: photo, contentMD5: digest.contentMD5,
                                           contentType: "image/jpeg", credentials: credentials)
        }
        await expectError(.forbidden) {
            _ = try await client.headObject(key: "thumbnails/elsewhere.dat", credentials: credentials)
        }

        // Local failures come before any byte is sent.
        await expectError(.localFile) {
            _ = try await client.putObject(key: photoKey, path: directory.path + "/gone.jpg",
                                           contentMD5: digest.contentMD5, contentType: "image/jpeg",
                                           credentials: credentials)
        }
        await expectError(.localFile) {
            _ = try await client.uploadPart(key: videoKey, uploadId: "x", partNumber: 1, path: photo, offset: 99_000,
                                            length: 5000, credentials: credentials)
        }
        var guarded = client
        guarded.configuration.requiredKeyPrefix = userPrefix
        await expectError(.permanent, code: "InvalidRequest") {
            _ = try await guarded.headObject(key: "photos/someone-else/x.dat", credentials: credentials)
        }

        // Any key lands under exactly that key: listed back by S3 itself, not just read
        // back through the same encoding. Authentication off, for moto's sake.
        try await moto.setAuthentication(false, client: client)
        let oddKey = userPrefix + "a b+c%d(é)!'*~&=?#;:@$,[]{}^|`\\\"<>.dat"
        _ = try await client.putObject(key: oddKey, path: photo, offset: 1000, length: 5000,
                                       contentMD5: rangeDigest.contentMD5, contentType: "image/jpeg",
                                       credentials: credentials)
        #expect(try await client.headObject(key: oddKey, credentials: credentials)?.size == 5000)
        try #expect(md5(of: await client.getObject(key: oddKey, credentials: credentials), in: directory)
            == rangeDigest.md5Hex)
        #expect(try await moto.listKeys(bucket: bucket, prefix: userPrefix + "a b", client: client) == [spacedKey, oddKey].sorted())
    }

    @Test("the transport counts requests by operation and status class, 403s, bytes sent, and requests that got no answer")
    func countsWhatItSends() async throws {
        let moto = try await MotoServer.start()
        defer { moto.stop() }
        let client = try S3Client(configuration: .init(bucket: bucket, region: "us-east-1", endpoint: moto.endpoint))
        let unreachable = try S3Client(configuration: .init(bucket: bucket, region: "us-east-1", endpoint: "http://127.0.0.1:1"))
        defer { Task { try? await client.shutdown(); try? await unreachable.shutdown() } }
        let credentials = try await moto.setUpAuthenticatedBucket(bucket, allowedPrefix: "photos/", client: client)
        let directory = try TemporaryDirectory()
        let photo = directory.file("photo.jpg", contents: randomBytes(100_000))
        let digest = try S3Client.digestFileRange(path: photo)
        let metrics = TestMetrics()
        try await withMetricsFactory(metrics) {
            _ = try await client.putObject(key: userPrefix + digest.md5Hex + ".dat", path: photo, contentMD5: digest.contentMD5,
                                           contentType: "image/jpeg", credentials: credentials)
            _ = try await client.headObject(key: userPrefix + "missing.dat", credentials: credentials)
            await #expect(throws: S3Error.self) {
                _ = try await client.putObject(key: "thumbnails/elsewhere.dat", path: photo, contentMD5: digest.contentMD5,
                                               contentType: "image/jpeg", credentials: credentials)
            }
            await #expect(throws: S3Error.self) { _ = try await unreachable.headObject(key: userPrefix + "x.dat", credentials: credentials) }
        }
        func count(_ operation: String, _ status: String) throws -> Int64 {
            try metrics.expectCounter(DaemonCounter.s3Requests.name, [("operation", operation), ("status_class", status)]).totalValue
        }
        #expect(try count("PutObject", "2xx") == 1)
        #expect(try count("PutObject", "4xx") == 1)
        #expect(try count("HeadObject", "4xx") == 1)
        #expect(try count("HeadObject", "error") == 1)
        #expect(try metrics.expectCounter(DaemonCounter.s3ForbiddenResponses.name, [("operation", "PutObject")]).totalValue == 1)
        #expect(try metrics.expectCounter(DaemonCounter.s3SentBytes.name).totalValue == 200_000)
    }

    @Test("a large PUT streams from the file: memory stays flat")
    func streamingKeepsMemoryFlat() async throws {
        let moto = try await MotoServer.start()
        defer { moto.stop() }
        let client = try S3Client(configuration: .init(bucket: bucket, region: "us-east-1", endpoint: moto.endpoint))
        defer { Task { try? await client.shutdown() } }
        let credentials = try await moto.setUpAuthenticatedBucket(bucket, allowedPrefix: "photos/", client: client)
        let directory = try TemporaryDirectory()
        let size = 96 << 20
        let path = directory.file("big.mp4", contents: [])
        let handle = try #require(FileHandle(forWritingAtPath: path))
        for _ in 0..<(size >> 20) { handle.write(Data(randomBytes(1 << 20))) }
        try handle.close()
        let digest = try S3Client.digestFileRange(path: path, sha256: true)

        guard let before = ProcessMemory.resetPeak() else {
            Issue.record("cannot reset the peak RSS (/proc/self/clear_refs); memory not measured")
            return
        }
        _ = try await client.putObject(key: userPrefix + digest.md5Hex + ".dat", path: path,
                                       contentMD5: digest.contentMD5, contentType: "video/mp4",
                                       payloadSHA256: digest.sha256Hex, credentials: credentials)
        let peak = try #require(ProcessMemory.peakBytes())
        #expect(peak - before < 32 << 20, "peak RSS grew by \((peak - before) >> 20) MiB for a 96 MiB upload")
        #expect(try await client.headObject(key: userPrefix + digest.md5Hex + ".dat", credentials: credentials)?.size
            == Int64(size))
    }

    func md5(of bytes: [UInt8], in directory: TemporaryDirectory) throws -> String {
        let path = directory.file(UUID().uuidString, contents: bytes)
        return try S3Client.digestFileRange(path: path).md5Hex
    }

    func expectError(_ kind: S3Error.Kind, code: String? = nil,
                     sourceLocation: SourceLocation = #_sourceLocation,
                     _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("expected an S3Error of kind \(kind)", sourceLocation: sourceLocation)
        } catch let error as S3Error {
            #expect(error.kind == kind, "\(error)", sourceLocation: sourceLocation)
            if let code { #expect(error.code == code, "\(error)", sourceLocation: sourceLocation) }
        } catch {
            Issue.record("expected an S3Error, got \(error)", sourceLocation: sourceLocation)
        }
    }
}
