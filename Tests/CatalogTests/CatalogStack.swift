import AsyncHTTPClient
import Account
import Bucket
import Catalog
import Foundation
import Logging
import NIOCore
import PhotolalaCore
import Testing

/// The real parts the catalog meets, on loopback: moto (S3 and STS, signatures and
/// session tokens enforced) and the fake Photolala backend vending real STS credentials
/// from it — the e2e suites' `fake_backend.py --with-moto`, started once for this test
/// process and stopped when it exits. Each test signs in as a user of its own, so tests
/// never see each other's catalogs.
actor CatalogStack {
    static let shared = CatalogStack()

    /// Tests against the stack need moto and the Python test tools (scripts/setup).
    static let available: Bool = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        return path.split(separator: ":").contains { FileManager.default.isExecutableFile(atPath: "\($0)/moto_server") }
    }()

    struct Info: Decodable {
        var backend: String
        var moto: String
        var bucket: String
        var region: String
    }

    private var started: Task<Info, any Error>?

    func info() async throws -> Info {
        if let started { return try await started.value }
        let task = Task { try await Self.launch() }
        started = task
        return try await task.value
    }

    private static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../e2e/support/fake_backend.py").standardized.path

    private static func launch() async throws -> Info {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        // The test process's threads block most signals and a spawned child inherits that
        // mask: unblocked first, or the SIGTERM at exit never arrives and the stack (moto
        // included) outlives the tests.
        let unblocked = "import runpy, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, set()); "
            + "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
        process.arguments = ["python3", "-c", unblocked, script, "--with-moto", "--quiet"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        StackProcess.remember(process.processIdentifier)
        // Line 1 is the stack as JSON once moto is set up (a few seconds).
        let line = try await Task.detached {
            var data = Data()
            while !data.contains(0x0A) {
                let chunk = out.fileHandleForReading.availableData
                guard !chunk.isEmpty else { throw StackError("fake_backend.py exited before printing its stack") }
                data.append(chunk)
            }
            return data.prefix { $0 != 0x0A }
        }.value
        return try JSONDecoder().decode(Info.self, from: line)
    }

    /// A fresh user signed in through the backend, the way `photolalactl login
    /// --identity-token` does it: the account service the daemon uses.
    func signIn(stateDir: String) async throws -> TestAccess {
        let info = try await info()
        let sub = "catalog-test-" + UUID().uuidString
        let token = try await mintIdentityToken(backend: info.backend, sub: sub)
        let logger = Logger(label: "catalog-tests")
        let account = AccountService(stateDir: stateDir, backend: BackendClient(baseURL: info.backend, logger: logger),
                                     deviceName: "catalog-tests", refreshBeforeExpiry: .seconds(300),
                                     appleCheckInterval: .seconds(3600), logger: logger)
        // The account performs its backend calls in `run()`, as in the daemon's service group.
        Task { try? await account.run() }
        let (userId, error) = await account.loginWithIdentityToken(token, authorizationCode: nil, by: .caller(uid: 0))
        guard let userId else { throw StackError("sign-in failed: \(error ?? "?")") }
        let grant = try await account.credentials()
        return TestAccess(account: account, userId: userId, grant: grant)
    }

    private func mintIdentityToken(backend: String, sub: String) async throws -> String {
        var request = HTTPClientRequest(url: backend + "/_test/identity-token")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: try JSONEncoder().encode(["sub": sub])))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(20))
        let body = try await response.body.collect(upTo: 1 << 20)
        struct Answer: Decodable { var identityToken: String }
        return try JSONDecoder().decode(Answer.self, from: Data(body.readableBytesView)).identityToken
    }
}

/// Stops the stack when the test process exits (a C handler cannot capture, hence the global).
enum StackProcess {
    nonisolated(unsafe) private static var pid: Int32 = 0

    static func remember(_ process: Int32) {
        pid = process
        atexit {
            // fake_backend.py stops its moto_server on SIGTERM.
            if StackProcess.pid > 0 { kill(StackProcess.pid, SIGTERM) }
        }
    }
}

struct StackError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The daemon's gate, minus the user's pause: the signed-in account.
struct TestAccess: StageGate {
    let account: AccountService
    let userId: String
    let grant: STSGrant

    func blockReason() async -> String? {
        await account.uploadBlock == nil ? nil : "the account does not allow uploads"
    }

    func changes() -> AsyncStream<Void> { account.statusChanges.changes() }

    /// The catalog stage's session, with the account's grants.
    func session(logger: Logger) -> BucketSession {
        BucketSession(grants: account, connections: 2, trust: .system, logger: logger)
    }

    /// An S3 client with this user's STS credentials and no key guard: what an app uses.
    func appClient() throws -> (S3Client, S3Credentials) {
        let client = try S3Client(configuration: .init(bucket: grant.bucket, region: grant.region, endpoint: grant.endpoint),
                                  httpClient: HTTPClient.shared)
        return (client, S3Credentials(accessKeyId: grant.accessKeyId, secretAccessKey: grant.secretAccessKey,
                                      sessionToken: grant.sessionToken, expiration: grant.expiration))
    }
}
