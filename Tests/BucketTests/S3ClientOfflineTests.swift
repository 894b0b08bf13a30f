#if canImport(Glibc)
import Glibc
#endif
import CoreMetrics
import Foundation
import MetricsTestKit
import Testing
import Bucket
import Digests
import PhotolalaCore

@Suite("S3 client, offline")
struct S3ClientOfflineTests {
    @Test("addressing: virtual-hosted on AWS, path-style on an endpoint")
    func addressing() throws {
        let aws = try S3Target(.init(bucket: "photolala", region: "eu-west-1"))
        #expect(aws.origin == "https://photolala.s3.eu-west-1.amazonaws.com")
        #expect(aws.hostHeader == "photolala.s3.eu-west-1.amazonaws.com")
        #expect(aws.pathPrefix == "")
        #expect(aws.usesTLS)

        let dotted = try S3Target(.init(bucket: "photos.example.com", region: "us-east-1"))
        #expect(dotted.origin == "https://s3.us-east-1.amazonaws.com")
        #expect(dotted.pathPrefix == "/photos.example.com")

        let moto = try S3Target(.init(bucket: "photolala", region: "us-east-1", endpoint: "http://127.0.0.1:5055"))
        #expect(moto.origin == "http://127.0.0.1:5055")
        #expect(moto.hostHeader == "127.0.0.1:5055")
        #expect(moto.pathPrefix == "/photolala")
        #expect(!moto.usesTLS)

        let based = try S3Target(.init(bucket: "b", region: "r", endpoint: "https://s3.example.com:443/storage/"))
        #expect(based.hostHeader == "s3.example.com")
        #expect(based.pathPrefix == "/storage/b")

        let v6 = try S3Target(.init(bucket: "b", region: "r", endpoint: "http://[::1]:9000"))
        #expect(v6.hostHeader == "[::1]:9000")

        #expect(throws: S3Error.self) { try S3Target(.init(bucket: "b", region: "r", endpoint: "ftp://x")) }
        #expect(throws: S3Error.self) { try S3Target(.init(bucket: "", region: "r")) }
    }

    @Test("object keys are encoded once into the path")
    func objectPaths() throws {
        let client = try S3Client(configuration: .init(bucket: "photolala", region: "us-east-1",
                                                       endpoint: "http://127.0.0.1:1"),
                                  httpClient: S3Client.makeHTTPClient())
        defer { Task { try? await client.shutdown() } }
        #expect(client.requests.objectPath("photos/550e8400-e29b-41d4-a716-446655440000/0cc175b9c0f1b6a831c399e269772661.dat")
            == "/photolala/photos/550e8400-e29b-41d4-a716-446655440000/0cc175b9c0f1b6a831c399e269772661.dat")
        #expect(client.requests.objectPath("photos/u/a b+c?d#e%.dat") == "/photolala/photos/u/a%20b%2Bc%3Fd%23e%25.dat")
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
        _ = FileManager.default.createFile(atPath: photo, contents: Data(repeating: 7, count: 1000))
        var st = stat()
        #expect(stat(photo, &st) == 0)
        let hashed = FileIdentity(st)
        #expect(throws: Never.self) { try S3Client.openBody(path: photo, expected: hashed, operation: "PutObject", key: nil) }
        // A FIFO without a writer: a blocking open would never return.
        let fifo = dir + "/fifo.jpg"
        #expect(mkfifo(fifo, 0o644) == 0)
        let started = ContinuousClock.now
        #expect { try S3Client.openBody(path: fifo, operation: "PutObject", key: nil) } throws: { ($0 as? S3Error)?.kind == .localFile }
        #expect(ContinuousClock.now - started < .seconds(1))
        // A link where the photo was, when links are not followed.
        let link = dir + "/link.jpg"
        #expect(symlink(photo, link) == 0)
        #expect { try S3Client.openBody(path: link, followSymlinks: false, operation: "PutObject", key: nil) } throws: { ($0 as? S3Error)?.kind == .localFile }
        #expect(throws: Never.self) { try S3Client.openBody(path: link, expected: hashed, followSymlinks: true, operation: "PutObject", key: nil) }
        // Another file than the one hashed (rewritten under the same name).
        unlink(photo)
        _ = FileManager.default.createFile(atPath: photo, contents: Data(repeating: 8, count: 1000))
        #expect { try S3Client.openBody(path: photo, expected: hashed, operation: "PutObject", key: nil) } throws: {
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

    @Test("a body's range is checked against the file, which must be there")
    func bodies() throws {
        let directory = try TemporaryDirectory()
        let abc = directory.file("abc", contents: Array("xxabcyy".utf8))
        let digest = try S3Client.digestFileRange(path: abc, offset: 2, length: 3, sha256: true)
        #expect(digest.md5Hex == "900150983cd24fb0d6963f7d28e17f72")
        #expect(digest.contentMD5 == "kAFQmDzST7DWlj99KOF/cg==")
        #expect(digest.sha256Hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")

        #expect(throws: S3Error.self) { try S3Client.openBody(path: abc, offset: 5, length: 4, operation: "PutObject", key: nil) }
        do {
            _ = try S3Client.openBody(path: directory.path + "/missing", operation: "PutObject", key: nil)
            Issue.record("a missing file was opened")
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
