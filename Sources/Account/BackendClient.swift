import AsyncHTTPClient
import Bucket
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PhotolalaCore

/// What the account service asks the backend (backend-api.md sections 1 to 6): the
/// real client, or a fake in a Swift test.
package protocol AccountBackend: Sendable {
    /// This NAS's id (s3-layout.md), sent with every call once made.
    var deviceId: String? { get set }
    func signInWithApple(identityToken: String, authorizationCode: String?, deviceName: String) async throws(BackendError) -> SignIn
    func startPairing(deviceName: String) async throws(BackendError) -> DeviceAuthorization
    func pollPairing(deviceCode: String) async throws(BackendError) -> SignIn
    func refresh(refreshToken: String) async throws(BackendError) -> RefreshedTokens
    func stsToken(accessToken: String) async throws(BackendError) -> STSGrant
    func appleCredentialState(accessToken: String) async throws(BackendError) -> AppleCredentialState
    /// Ends the sign-in `refreshToken` belongs to (section 6); an unknown or already
    /// revoked token is answered 200 too.
    func revoke(refreshToken: String) async throws(BackendError)
}

/// Talks to the Photolala backend over HTTPS (plain HTTP only for loopback, as config
/// checks). Every call has a deadline; errors come back classified, never with a token.
package struct BackendClient: AccountBackend {
    package let baseURL: String
    let http: HTTPClient
    let timeout: TimeAmount
    let logger: Logger
    /// What an https base URL's certificate is verified against (`tls.ca_file`).
    package let trust: TLSTrust
    /// This NAS's id (s3-layout.md): in the sign-in and pairing bodies, and as
    /// `X-Device-ID` on every call, so the backend can list and revoke the device.
    package var deviceId: String?

    package init(baseURL: String, trust: TLSTrust = .system, http: HTTPClient = BackendClient.sharedHTTP,
                timeout: TimeAmount = .seconds(20), logger: Logger) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.trust = trust
        self.http = http
        self.timeout = timeout
        self.logger = logger
    }

    /// One client for the process, kept alive like `HTTPClient.shared`, but one whose pool
    /// fails a request at once when its connection cannot be made (refused, certificate
    /// refused) instead of retrying until the deadline: the credentials machine retries
    /// with its own backoff, and status says why in the meantime.
    package static let sharedHTTP: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    // MARK: section 1

    package func signInWithApple(identityToken: String, authorizationCode: String?, deviceName: String) async throws(BackendError) -> SignIn {
        var body: [String: String] = ["identityToken": identityToken, "deviceName": deviceName]
        if let authorizationCode { body["authorizationCode"] = authorizationCode }
        if let deviceId { body["deviceId"] = deviceId }
        return try await call("POST", "/api/auth/apple", body: body, as: SignIn.self)
    }

    // MARK: section 2

    package func startPairing(deviceName: String) async throws(BackendError) -> DeviceAuthorization {
        var body = ["deviceName": deviceName]
        if let deviceId { body["deviceId"] = deviceId }
        return try await call("POST", "/api/v1/auth/device", body: body, as: DeviceAuthorization.self)
    }

    package func pollPairing(deviceCode: String) async throws(BackendError) -> SignIn {
        try await call("POST", "/api/v1/auth/device/token", body: ["deviceCode": deviceCode], as: SignIn.self)
    }

    // MARK: section 3

    package func refresh(refreshToken: String) async throws(BackendError) -> RefreshedTokens {
        try await call("POST", "/api/auth/refresh", body: ["refreshToken": refreshToken], as: RefreshedTokens.self)
    }

    // MARK: section 4

    package struct STSAnswer: Decodable {
        struct Creds: Decodable {
            var accessKeyId: String
            var secretAccessKey: String
            var sessionToken: String
            var expiration: String
        }
        var credentials: Creds
        var region: String
        var bucket: String
        var endpoint: String?

        package func grant() throws(BackendError) -> STSGrant {
            guard let expiration = Timestamp.parse(credentials.expiration) else {
                throw .transient("sts-token answered an unreadable expiration")
            }
            return STSGrant(accessKeyId: credentials.accessKeyId, secretAccessKey: credentials.secretAccessKey,
                            sessionToken: credentials.sessionToken, expiration: expiration, region: region, bucket: bucket,
                            endpoint: (endpoint?.isEmpty ?? true) ? nil : endpoint)
        }
    }

    package func stsToken(accessToken: String) async throws(BackendError) -> STSGrant {
        try await call("POST", "/api/v1/auth/sts-token", bearer: accessToken, body: nil as [String: String]?, as: STSAnswer.self).grant()
    }

    // MARK: section 5

    package struct StateAnswer: Decodable {
        var state: String
        var checkedAt: String?

        package func credentialState() throws(BackendError) -> AppleCredentialState {
            guard let known = AppleCredentialState.State(rawValue: state) else {
                throw .transient("credential-state answered an unknown state '\(state.prefix(32))'")
            }
            return AppleCredentialState(state: known, checkedAt: checkedAt.flatMap(Timestamp.parse))
        }
    }

    package func appleCredentialState(accessToken: String) async throws(BackendError) -> AppleCredentialState {
        try await call("GET", "/api/v1/auth/apple/credential-state", bearer: accessToken, body: nil as [String: String]?, as: StateAnswer.self)
            .credentialState()
    }

    // MARK: section 6

    /// Nothing in the answer matters but its status (`{}`).
    struct Revoked: Decodable {}

    /// `logout` waits for this while the user does: a backend that does not answer within
    /// 10 s is taken for unreachable (the sign-in is erased all the same).
    package static let revokeTimeout: TimeAmount = .seconds(10)

    package func revoke(refreshToken: String) async throws(BackendError) {
        _ = try await call("POST", "/api/auth/revoke", body: ["refreshToken": refreshToken], as: Revoked.self,
                           timeout: min(timeout, Self.revokeTimeout))
    }

    // MARK: transport

    func call<Body: Encodable, Answer: Decodable>(_ method: String, _ path: String, bearer: String? = nil, body: Body?, as: Answer.Type,
                                                  timeout: TimeAmount? = nil) async throws(BackendError) -> Answer {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = HTTPMethod(rawValue: method)
        if baseURL.lowercased().hasPrefix("https:") { request.tlsConfiguration = trust.configuration }
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "User-Agent", value: "photolalad/\(PhotolalaVersion.current)")
        if let bearer { request.headers.add(name: "Authorization", value: "Bearer \(bearer)") }
        if let deviceId { request.headers.add(name: "X-Device-ID", value: deviceId) }
        if let body {
            guard let data = try? JSONEncoder().encode(body) else { throw .transient("could not encode the request") }
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: data))
        } else if method == "POST" {
            request.headers.add(name: "Content-Length", value: "0")
        }
        var status = 0
        let bytes: ByteBuffer
        do {
            let response = try await http.execute(request, timeout: timeout ?? self.timeout)
            status = Int(response.status.code)
            DaemonCounter.backendRequests.increment(path, "\(status)")
            bytes = try await response.body.collect(upTo: 1 << 20)
        } catch {
            if status == 0 { DaemonCounter.backendRequests.increment(path, "error") }
            logger.debug("backend call failed", metadata: ["call": "\(method) \(path)", "error": "\(type(of: error))"])
            if let (host, port) = endpoint, let why = await trust.explain(error, host: host, port: port) {
                throw .transient(why)
            }
            throw .transient(Self.describe(error))
        }
        let data = Data(bytes.readableBytesView)
        if (200..<300).contains(status) {
            return try Self.decode(Answer.self, from: data, status: status, path: path)
        }
        let refusal = BackendRefusal(status: status, body: data)
        logger.debug("backend refused", metadata: ["call": "\(method) \(path)", "status": "\(status)", "code": "\(refusal.code)"])
        throw refusal.error(withBearer: bearer != nil)
    }

    /// A 2xx body as the call's answer; one the daemon cannot read is a transient error
    /// (a backend mid-deploy), never a crash. Unknown fields are ignored (backend-api.md).
    package static func decode<Answer: Decodable>(_ type: Answer.Type, from body: Data, status: Int = 200, path: String) throws(BackendError) -> Answer {
        do {
            return try JSONDecoder().decode(Answer.self, from: body)
        } catch {
            throw .transient("unexpected answer from \(path) (HTTP \(status))")
        }
    }

    /// The host and port the base URL connects to.
    var endpoint: (String, Int)? {
        guard let url = URL(string: baseURL), let host = url.host, !host.isEmpty else { return nil }
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        return (bare, url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80))
    }

    static func describe(_ error: Error) -> String {
        if let e = error as? HTTPClientError {
            if e == .deadlineExceeded || e == .readTimeout || e == .connectTimeout { return "timed out" }
            return "\(e)"
        }
        return "\(type(of: error)): \(error)"
    }
}
