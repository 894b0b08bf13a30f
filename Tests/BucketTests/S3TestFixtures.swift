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

// Fixtures the S3 client's suites share: random bytes, a temporary directory, a file
// range's digests, this process's peak memory, and a moto_server with authentication on.

/// The MD5 (hex, and base64 for Content-MD5) and SHA-256 of a file range, as the S3
/// client reads a body (`S3Client.openBody`), for the tests' keys and headers.
struct RangeDigest: Equatable {
    var md5Hex: String
    var contentMD5: String
    var sha256Hex: String?
}

extension S3Client {
    static func digestFileRange(path: String, offset: Int64 = 0, length: Int64? = nil,
                                sha256: Bool = false) throws(S3Error) -> RangeDigest {
        let (file, length) = try openBody(path: path, offset: offset, length: length, operation: "Digest", key: nil)
        let digest = try Self.digest(file, offset: offset, length: length, md5: true, sha256: sha256, operation: "Digest",
                                     key: "")
        return RangeDigest(md5Hex: digest.md5Hex!, contentMD5: contentMD5(digest: digest.md5!), sha256Hex: digest.sha256Hex)
    }
}

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

    private func expectOK(_ response: S3Response, _ what: String) throws {
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
