import Digests
import Foundation
import NIOCore
import PhotolalaCore
import Synchronization
import Testing
import Bucket

/// The operations the stages after the upload use — listing, conditional writes, reading
/// back, archive restores — against moto with signatures and session tokens enforced.
@Suite("S3 client: listing, conditional writes, reads, restores against moto_server", .serialized,
       .enabled(if: MotoServer.executable != nil, "moto_server is not on PATH: install moto[server] to run these"))
struct S3ClientStageOperationsTests {
    let bucket = "photolala"
    let user = "550E8400-E29B-41D4-A716-446655440000"

    func start() async throws -> (MotoServer, S3Client, S3Credentials) {
        let moto = try await MotoServer.start()
        let client = try S3Client(configuration: .init(bucket: bucket, region: "us-east-1", endpoint: moto.endpoint))
        let credentials = try await moto.setUpAuthenticatedBucket(bucket, allowedPrefix: "", client: client)
        return (moto, client, credentials)
    }

    @Test("a listing with '/' in its prefix pages through every key with continuation tokens")
    func listing() async throws {
        let (moto, client, credentials) = try await start()
        defer { moto.stop(); Task { try? await client.shutdown() } }
        let prefix = "photos/\(user)/"
        var expected: [String] = []
        for i in 0..<7 {
            let body = Array("photo \(i)".utf8)
            let key = prefix + Hex.string(MD5.digest(body)) + ".dat"
            _ = try await client.putObject(key: key, bytes: body, contentType: "image/jpeg", credentials: credentials)
            expected.append(key)
        }
        _ = try await client.putObject(key: "thumbnails/\(user)/x.jpg", bytes: [1], contentType: "image/jpeg",
                                       credentials: credentials)
        var listed: [ListedObject] = []
        var token: String?
        var pages = 0
        repeat {
            let page = try await client.listObjects(prefix: prefix, continuationToken: token, maxKeys: 3, credentials: credentials)
            listed += page.objects
            token = page.nextContinuationToken
            pages += 1
        } while token != nil
        #expect(pages == 3)
        #expect(listed.map(\.key) == expected.sorted())
        for object in listed {
            #expect(object.key.hasSuffix(object.etag + ".dat"), "a single PUT's ETag is its MD5")
            #expect(object.storageClass == "STANDARD")
        }
        #expect(listed.first?.size == Int64("photo 0".utf8.count))
        let none = try await client.listObjects(prefix: "photos/\(user)/zz", credentials: credentials)
        #expect(none.objects.isEmpty && none.nextContinuationToken == nil)
    }

    @Test("a listing outside the client's prefix is refused before it is sent")
    func listingOutsideThePrefix() async throws {
        let client = try S3Client(configuration: .init(bucket: bucket, region: "us-east-1", endpoint: "http://127.0.0.1:1",
                                                       requiredKeyPrefix: "photos/\(user)/"))
        defer { Task { try? await client.shutdown() } }
        await #expect { _ = try await client.listObjects(prefix: "photos/", credentials: MotoServer.anyCredentials) } throws: {
            ($0 as? S3Error)?.code == "InvalidRequest"
        }
    }

    @Test("If-None-Match: * and If-Match make a compare-and-swap; a failed condition is preconditionFailed")
    func conditionalWrites() async throws {
        let (moto, client, credentials) = try await start()
        defer { moto.stop(); Task { try? await client.shutdown() } }
        let pointer = "catalogs/\(user)/.photolala.md5"
        let first = try await client.putObject(key: pointer, bytes: Array("aaaa\n".utf8), contentType: "text/plain",
                                               ifNoneMatch: true, credentials: credentials)
        await #expect { _ = try await client.putObject(key: pointer, bytes: Array("bbbb\n".utf8), contentType: "text/plain",
                                                       ifNoneMatch: true, credentials: credentials) } throws: {
            ($0 as? S3Error)?.kind == .preconditionFailed
        }
        await #expect { _ = try await client.putObject(key: pointer, bytes: Array("cccc\n".utf8), contentType: "text/plain",
                                                       ifMatch: "0123456789abcdef0123456789abcdef", credentials: credentials) } throws: {
            ($0 as? S3Error)?.kind == .preconditionFailed
        }
        let second = try await client.putObject(key: pointer, bytes: Array("dddd\n".utf8), contentType: "text/plain",
                                                ifMatch: first, credentials: credentials)
        #expect(second != first)
        let read = try #require(try await client.getObjectIfPresent(key: pointer, credentials: credentials))
        #expect(read.bytes == Array("dddd\n".utf8) && read.etag == second)
        #expect(try await client.getObjectIfPresent(key: "catalogs/\(user)/missing", credentials: credentials) == nil)
    }

    @Test("a streamed, ranged read brings back exactly the bytes asked for")
    func streamedReads() async throws {
        let (moto, client, credentials) = try await start()
        defer { moto.stop(); Task { try? await client.shutdown() } }
        let body = randomBytes(3 << 20)
        let key = "photos/\(user)/\(Hex.string(MD5.digest(body))).dat"
        _ = try await client.putObject(key: key, bytes: body, contentType: "image/jpeg", credentials: credentials)
        let collected = Mutex<[UInt8]>([])
        let whole = try await client.getObject(key: key, expectedBytes: Int64(body.count), credentials: credentials) { buffer in
            collected.withLock { $0 += Array(buffer: buffer) }
        }
        #expect(collected.withLock { $0 } == body)
        #expect(whole.objectSize == Int64(body.count) && whole.contentLength == Int64(body.count))
        #expect(whole.etag == Hex.string(MD5.digest(body)))

        collected.withLock { $0 = [] }
        let part = try await client.getObject(key: key, range: 1000...1999, credentials: credentials) { buffer in
            collected.withLock { $0 += Array(buffer: buffer) }
        }
        #expect(collected.withLock { $0 } == Array(body[1000...1999]))
        #expect(part.contentLength == 1000 && part.objectSize == Int64(body.count))

        await #expect { _ = try await client.getObject(key: "photos/\(user)/missing.dat", credentials: credentials) { _ in } } throws: {
            ($0 as? S3Error)?.kind == .notFound
        }
        struct DiskFull: Error {}
        await #expect { _ = try await client.getObject(key: key, credentials: credentials) { _ in throw DiskFull() } } throws: {
            ($0 as? S3Error)?.code == "ConsumerFailed"
        }
    }

    @Test("an object in DEEP_ARCHIVE is asked back with RestoreObject and HEAD says when it can be read")
    func archiveRestores() async throws {
        let (moto, client, credentials) = try await start()
        defer { moto.stop(); Task { try? await client.shutdown() } }
        let directory = try TemporaryDirectory()
        let path = directory.file("old.jpg", contents: randomBytes(1000))
        let digest = try S3Client.digestFileRange(path: path)
        let key = "photos/\(user)/\(digest.md5Hex).dat"
        _ = try await client.putObject(key: key, path: path, contentMD5: digest.contentMD5, contentType: "image/jpeg",
                                       storageClass: "DEEP_ARCHIVE", credentials: credentials)
        let before = try #require(try await client.headObject(key: key, credentials: credentials))
        #expect(before.storageClass == "DEEP_ARCHIVE" && before.needsRestore)
        let listed = try await client.listObjects(prefix: "photos/\(user)/", credentials: credentials)
        #expect(listed.objects.first?.storageClass == "DEEP_ARCHIVE")
        let asked = try await client.restoreObject(key: key, days: 1, credentials: credentials)
        #expect([.started, .available].contains(asked))
        let after = try #require(try await client.headObject(key: key, credentials: credentials))
        #expect(after.restore != nil)
    }

    @Test("x-amz-restore: in progress, then available")
    func restoreHeader() {
        #expect(S3Response.restoreState(#"ongoing-request="true""#) == .inProgress)
        #expect(S3Response.restoreState(#"ongoing-request="false", expiry-date="Fri, 21 Dec 2012 00:00:00 GMT""#) == .available)
        let archived = S3Client.ObjectInfo(size: 1, etag: "e", storageClass: "GLACIER", restore: .inProgress)
        #expect(archived.needsRestore)
        #expect(!S3Client.ObjectInfo(size: 1, etag: "e", storageClass: "GLACIER", restore: .available).needsRestore)
        #expect(!S3Client.ObjectInfo(size: 1, etag: "e", storageClass: "STANDARD_IA").needsRestore)
    }
}
