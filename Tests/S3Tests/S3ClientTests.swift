#if canImport(Glibc)
import Glibc
#endif
import CoreMetrics
import Foundation
import MetricsTestKit
import Testing
@testable import S3
import Digests
import PhotolalaCore

@Suite("S3 client, offline")
struct S3ClientOfflineTests {
    @Test("addressing: virtual-hosted on AWS, path-style on an endpoint")
    func addressing() throws {
        let aws = try S3Client.Target(.init(bucket: "photolala", region: "eu-west-1"))
        #expect(aws.origin == "https://photolala.s3.eu-west-1.amazonaws.com")
        #expect(aws.hostHeader == "photolala.s3.eu-west-1.amazonaws.com")
        #expect(aws.pathPrefix == "")
        #expect(aws.usesTLS)

        let dotted = try S3Client.Target(.init(bucket: "photos.example.com", region: "us-east-1"))
        #expect(dotted.origin == "https://s3.us-east-1.amazonaws.com")
        #expect(dotted.pathPrefix == "/photos.example.com")

        let moto = try S3Client.Target(.init(bucket: "photolala", region: "us-east-1", endpoint: "http://127.0.0.1:5055"))
        #expect(moto.origin == "http://127.0.0.1:5055")
        #expect(moto.hostHeader == "127.0.0.1:5055")
        #expect(moto.pathPrefix == "/photolala")
        #expect(!moto.usesTLS)

        let based = try S3Client.Target(.init(bucket: "b", region: "r", endpoint: "https://s3.example.com:443/storage/"))
        #expect(based.hostHeader == "s3.example.com")
        #expect(based.pathPrefix == "/storage/b")

        let v6 = try S3Client.Target(.init(bucket: "b", region: "r", endpoint: "http://[::1]:9000"))
        #expect(v6.hostHeader == "[::1]:9000")

        #expect(throws: S3Error.self) { try S3Client.Target(.init(bucket: "b", region: "r", endpoint: "ftp://x")) }
        #expect(throws: S3Error.self) { try S3Client.Target(.init(bucket: "", region: "r")) }
    }

    @Test("object keys are encoded once into the path")
    func objectPaths() throws {
        let client = try S3Client(configuration: .init(bucket: "photolala", region: "us-east-1",
                                                       endpoint: "http://127.0.0.1:1"),
                                  httpClient: S3Client.makeHTTPClient())
        defer { Task { try? await client.shutdown() } }
        #expect(client.objectPath("photos/550e8400-e29b-41d4-a716-446655440000/0cc175b9c0f1b6a831c399e269772661.dat")
            == "/photolala/photos/550e8400-e29b-41d4-a716-446655440000/0cc175b9c0f1b6a831c399e269772661.dat")
        #expect(client.objectPath("photos/u/a b+c?d#e%.dat") == "/photolala/photos/u/a%20b%2Bc%3Fd%23e%25.dat")
        #expect(client.signsPayload)
    }

    @Test("the request deadline grows with the body: 60 s plus size at 100 KB/s")
    func deadline() throws {
        let client = try S3Client(configuration: .init(bucket: "b", region: "r"), httpClient: S3Client.makeHTTPClient())
        defer { Task { try? await client.shutdown() } }
        #expect(client.requestTimeout(bodyBytes: 0) == 60)
        #expect(client.requestTimeout(bodyBytes: 16 << 20) == 60 + Double(16 << 20) / 102_400)
        #expect(!client.signsPayload)
    }

    @Test("a FIFO, a link or another file swapped in at the path is refused at once, never read")
    func swappedFilesAreRefused() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("s3-open-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let photo = dir + "/photo.jpg"
        FileManager.default.createFile(atPath: photo, contents: Data(repeating: 7, count: 1000))
        var st = stat()
        #expect(stat(photo, &st) == 0)
        let hashed = FileIdentity(st)
        #expect(throws: Never.self) { try OpenFile(path: photo, operation: "PutObject", key: nil, expected: hashed) }
        // A FIFO without a writer: a blocking open would never return.
        let fifo = dir + "/fifo.jpg"
        #expect(mkfifo(fifo, 0o644) == 0)
        let started = ContinuousClock.now
        #expect { try OpenFile(path: fifo, operation: "PutObject", key: nil) } throws: { ($0 as? S3Error)?.kind == .localFile }
        #expect(ContinuousClock.now - started < .seconds(1))
        // A link where the photo was, when links are not followed.
        let link = dir + "/link.jpg"
        #expect(symlink(photo, link) == 0)
        #expect { try OpenFile(path: link, operation: "PutObject", key: nil, followSymlinks: false) } throws: { ($0 as? S3Error)?.kind == .localFile }
        #expect(throws: Never.self) { try OpenFile(path: link, operation: "PutObject", key: nil, expected: hashed, followSymlinks: true) }
        // Another file than the one hashed (rewritten under the same name).
        unlink(photo)
        FileManager.default.createFile(atPath: photo, contents: Data(repeating: 8, count: 1000))
        #expect { try OpenFile(path: photo, operation: "PutObject", key: nil, expected: hashed) } throws: {
            ($0 as? S3Error)?.kind == .localFile && "\($0)".contains("changed since it was hashed")
        }
    }

    @Test("Content-MD5 from a hex MD5")
    func contentMD5() {
        #expect(S3Client.contentMD5(hex: "d41d8cd98f00b204e9800998ecf8427e") == "1B2M2Y8AsgTpgAmY7PhCfg==")
        #expect(S3Client.contentMD5(hex: "D41D8CD98F00B204E9800998ECF8427E") == "1B2M2Y8AsgTpgAmY7PhCfg==")
        #expect(S3Client.contentMD5(hex: "d41d8cd9") == nil)
        #expect(S3Client.contentMD5(hex: "z41d8cd98f00b204e9800998ecf8427e") == nil)
    }

    @Test("digests of a file range: MD5 and SHA-256, fed in pieces or at once")
    func digests() throws {
        let directory = try TemporaryDirectory()
        let abc = directory.file("abc", contents: Array("xxabcyy".utf8))
        let digest = try S3Client.digestFileRange(path: abc, offset: 2, length: 3, sha256: true)
        #expect(digest.md5Hex == "900150983cd24fb0d6963f7d28e17f72")
        #expect(digest.contentMD5 == "kAFQmDzST7DWlj99KOF/cg==")
        #expect(digest.sha256Hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")

        let empty = directory.file("empty", contents: [])
        let none = try S3Client.digestFileRange(path: empty, sha256: true)
        #expect(none.md5Hex == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(none.sha256Hex == SigV4Signer.emptyPayloadHash)

        let bytes = (0..<100_003).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let big = directory.file("big", contents: bytes)
        let inPieces = try S3Client.digestFileRange(path: big, sha256: true, chunkSize: 7)
        let atOnce = try S3Client.digestFileRange(path: big, sha256: true, chunkSize: 1 << 20)
        #expect(inPieces == atOnce)

        #expect(throws: S3Error.self) { try S3Client.digestFileRange(path: big, offset: 100_000, length: 4) }
        do {
            _ = try S3Client.digestFileRange(path: directory.path + "/missing")
            Issue.record("a missing file was digested")
        } catch {
            #expect(error.kind == .localFile)
            #expect(error.message.contains("disappeared"))
        }
    }

    @Test("credentials never print their secrets")
    func credentialsRedacted() {
        let credentials = S3Credentials(accessKeyId: "ASIAEXAMPLEKEYID", secretAccessKey: "very-secret-key",
                                        sessionToken: "session-token-value",
                                        expiration: Date(timeIntervalSince1970: 1_795_330_800))
        for text in [credentials.description, credentials.debugDescription, "\(credentials)", String(reflecting: credentials)] {
            #expect(text.contains("ASIA…"))
            #expect(!text.contains("EXAMPLEKEYID"))
            #expect(!text.contains("very-secret-key"))
            #expect(!text.contains("session-token-value"))
        }
        var dumped = ""
        dump(credentials, to: &dumped)
        #expect(!dumped.contains("very-secret-key") && !dumped.contains("session-token-value") && !dumped.contains("EXAMPLEKEYID"))
        #expect(credentials.expires(within: 300, of: Date(timeIntervalSince1970: 1_795_330_600)))
        #expect(!credentials.expires(within: 300, of: Date(timeIntervalSince1970: 1_795_330_000)))
    }
}

// MARK: - Against moto

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
        #expect(try await client.headObject(key: photoKey, credentials: credentials)
            == S3Client.ObjectInfo(size: 100_000, etag: digest.md5Hex))
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

// MARK: - Fixtures

func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBytes { raw in
        let words = raw.bindMemory(to: UInt64.self)
        for i in words.indices { words[i] = generator.next() }
        for i in (words.count * 8)..<count { raw[i] = UInt8.random(in: 0...255) }
    }
    return bytes
}

/// A directory removed when the value goes away.
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("s3tests-" + UUID().uuidString).path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func file(_ name: String, contents: [UInt8]) -> String {
        let file = path + "/" + name
        _ = FileManager.default.createFile(atPath: file, contents: Data(contents))
        return file
    }
}

/// Peak resident memory of this process, from /proc (Linux).
enum ProcessMemory {
    /// Resets the peak to the current RSS and returns it.
    static func resetPeak() -> Int? {
        guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return nil }
        defer { try? handle.close() }
        do { try handle.write(contentsOf: Data("5".utf8)) } catch { return nil }
        return value(of: "VmRSS")
    }

    static func peakBytes() -> Int? { value(of: "VmHWM") }

    private static func value(of field: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
            return kilobytes.map { $0 * 1024 }
        }
        return nil
    }
}

/// A `moto_server` on a free loopback port, for one test. Started with authentication off
/// so the test can create a role, assume it and create the bucket; then authentication
/// is switched on (`/moto-api/reset-auth`) and every request must carry a valid
/// signature and session token.
final class MotoServer: @unchecked Sendable {
    // Only touched by the test that owns it: start, then stop.
    let process: Process
    let port: Int
    let logPath: String
    var endpoint: String { "http://127.0.0.1:\(port)" }

    /// moto_server with its SigV4 check fixed for listings (getmoto/moto#5948), the same
    /// launcher the e2e stack uses; nil when moto is not installed.
    static let executable: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        guard path.split(separator: ":").contains(where: { FileManager.default.isExecutableFile(atPath: "\($0)/moto_server") }) else {
            return nil
        }
        return path.split(separator: ":").map { "\($0)/python3" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    static let launcher = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../e2e/support/moto_server_fixed.py").standardized.path

    private init(process: Process, port: Int, logPath: String) {
        self.process = process
        self.port = port
        self.logPath = logPath
    }

    static func start() async throws -> MotoServer {
        let executable = try #require(executable)
        let port = try freePort()
        let logPath = FileManager.default.temporaryDirectory.appendingPathComponent("moto-\(port).log").path
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [launcher, "-H", "127.0.0.1", "-p", String(port)]
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "INITIAL_NO_AUTH_ACTION_COUNT")
        process.environment = environment
        process.standardOutput = FileHandle(forWritingAtPath: logPath)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        try process.run()
        let server = MotoServer(process: process, port: port, logPath: logPath)

        let probe = try S3Client(configuration: .init(bucket: "probe", region: "us-east-1", endpoint: server.endpoint))
        defer { Task { try? await probe.shutdown() } }
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            guard process.isRunning else { break }
            if let response = try? await probe.execute(
                .init(operation: "Probe", method: .GET, path: "/moto-api/"), credentials: anyCredentials),
                response.status == 200 {
                return server
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        server.stop()
        throw MotoError("moto_server did not answer on port \(port); see \(logPath)")
    }

    /// SIGTERM, then SIGKILL: a moto_server started from the test runner was seen to
    /// outlive SIGTERM, and waiting on it forever would hang the suite.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        for _ in 0..<20 where process.isRunning { usleep(100_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    static let anyCredentials = S3Credentials(accessKeyId: "AKIDSETUP", secretAccessKey: "setup")
    static let accountId = "123456789012"

    /// Role with S3 rights under `allowedPrefix`, assumed for STS credentials; the bucket;
    /// then authentication on. Returns the session credentials.
    func setUpAuthenticatedBucket(_ bucket: String, allowedPrefix: String, client: S3Client) async throws -> S3Credentials {
        let role = "photolalad-test"
        let trust = #"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"sts:AssumeRole"}]}"#
        let policy = #"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":["arn:aws:s3:::\#(bucket)","arn:aws:s3:::\#(bucket)/\#(allowedPrefix)*"]}]}"#
        _ = try await form(client, service: "iam", ["Action": "CreateRole", "Version": "2010-05-08", "RoleName": role,
                                                    "AssumeRolePolicyDocument": trust])
        _ = try await form(client, service: "iam", ["Action": "PutRolePolicy", "Version": "2010-05-08", "RoleName": role,
                                                    "PolicyName": "photos", "PolicyDocument": policy])
        let assumed = try await form(client, service: "sts", [
            "Action": "AssumeRole", "Version": "2011-06-15", "RoleSessionName": "s3tests",
            "RoleArn": "arn:aws:iam::\(Self.accountId):role/\(role)",
        ])
        let credentialsElement = try #require(assumed.child("AssumeRoleResult")?.child("Credentials"))
        let accessKeyId = try #require(credentialsElement.childText("AccessKeyId"))
        let secretAccessKey = try #require(credentialsElement.childText("SecretAccessKey"))
        let sessionToken = try #require(credentialsElement.childText("SessionToken"))
        let credentials = S3Credentials(accessKeyId: accessKeyId, secretAccessKey: secretAccessKey,
                                        sessionToken: sessionToken)

        let created = try await client.execute(.init(operation: "CreateBucket", method: .PUT, path: "/" + bucket),
                                               credentials: Self.anyCredentials)
        try expectOK(created, "CreateBucket")
        try await setAuthentication(true, client: client)
        return credentials
    }

    /// moto's `/moto-api/reset-auth` sets how many requests still go unauthenticated.
    func setAuthentication(_ on: Bool, client: S3Client) async throws {
        let reset = try await client.execute(.init(operation: "ResetAuth", method: .POST, path: "/moto-api/reset-auth",
                                                   body: .bytes(Array((on ? "0" : "1000000000").utf8))),
                                             credentials: Self.anyCredentials)
        try expectOK(reset, "reset-auth")
    }

    /// ListObjectsV2 keys under `prefix`, in S3's order.
    func listKeys(bucket: String, prefix: String, client: S3Client) async throws -> [String] {
        let response = try await client.execute(
            .init(operation: "ListObjectsV2", method: .GET, path: "/" + bucket,
                  query: [.init("list-type", "2"), .init("prefix", prefix)]),
            credentials: Self.anyCredentials)
        try expectOK(response, "ListObjectsV2")
        let root = try #require(S3XMLElement.parse(response.body))
        return root.children("Contents").compactMap { $0.childText("Key") }
    }

    private func form(_ client: S3Client, service: String, _ fields: [String: String]) async throws -> S3XMLElement {
        let body = fields.sorted { $0.key < $1.key }
            .map { SigV4Signer.uriEncode($0.key, encodeSlash: true) + "=" + SigV4Signer.uriEncode($0.value, encodeSlash: true) }
            .joined(separator: "&")
        let response = try await client.execute(
            .init(operation: fields["Action"]!, method: .POST, path: "/",
                  headers: [.init("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")],
                  body: .bytes(Array(body.utf8)), payloadHash: SigV4Signer.unsignedPayload),
            credentials: Self.anyCredentials, signer: SigV4Signer(region: "us-east-1", service: service))
        try expectOK(response, fields["Action"]!)
        return try #require(S3XMLElement.parse(response.body))
    }

    private func expectOK(_ response: S3Client.Response, _ what: String) throws {
        guard response.status == 200 else {
            throw MotoError("\(what) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
        }
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw MotoError("socket() failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw MotoError("could not find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

struct MotoError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
