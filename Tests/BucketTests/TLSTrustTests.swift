import AsyncHTTPClient
import Foundation
import NIOCore
import Testing
import Bucket

/// Real handshakes with a local HTTPS server, through async-http-client configured as the
/// daemon's clients are: each kind of certificate is accepted or refused, and a refusal
/// comes back as a sentence that says what is wrong and what to do.
@Suite struct TLSTrustTests {
    static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    let folder: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tls-tests-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    /// One GET to `host` on the server's port under `trust`: the status, or the sentence
    /// `explain` makes of the failure.
    func get(_ identity: ServerIdentity, host: String = "127.0.0.1", trust: TLSTrust) async throws -> Result<Int, Refusal> {
        let server = try await TLSTestServer.start(identity)
        var request = HTTPClientRequest(url: "https://\(host):\(server.port)/")
        request.tlsConfiguration = trust.configuration
        do {
            let response = try await Self.client.execute(request, timeout: .seconds(10))
            _ = try await response.body.collect(upTo: 1024)
            try await server.stop()
            return .success(Int(response.status.code))
        } catch {
            let sentence = await trust.explain(error, host: host, port: server.port)
            try await server.stop()
            return .failure(Refusal(text: sentence ?? "not a TLS failure: \(error)"))
        }
    }

    struct Refusal: Error, Equatable {
        var text: String
    }

    func refusal(_ result: Result<Int, Refusal>) -> String {
        if case .failure(let refusal) = result { return refusal.text }
        return "accepted"
    }

    @Test func aCertificateFromTheCAOfCAFileIsAcceptedByAddressAndByName() async throws {
        let ca = try TestCA()
        let identity = try ca.issue(["127.0.0.1", "localhost"])
        let trust = TLSTrust(caFile: try ca.writePEM(in: folder))
        #expect(try await get(identity, host: "127.0.0.1", trust: trust) == .success(200))
        #expect(try await get(identity, host: "localhost", trust: trust) == .success(200))
    }

    @Test func anUnknownCAIsRefusedNamingItsIssuerAndTheSetting() async throws {
        let identity = try TestCA("Someone Else's CA").issue(["127.0.0.1"])
        let withoutFile = refusal(try await get(identity, trust: .system))
        #expect(withoutFile.hasPrefix("certificate for 127.0.0.1 is not trusted: it was issued by CN=Someone Else's CA"))
        #expect(withoutFile.contains("tls.ca_file (not set)"))
        #expect(withoutFile.contains("set tls.ca_file to its CA certificate"))

        let otherFile = try TestCA("Photolala Test CA").writePEM(in: folder)
        let withOtherFile = refusal(try await get(identity, trust: TLSTrust(caFile: otherFile)))
        #expect(withOtherFile.contains("tls.ca_file (\(otherFile))"))
    }

    @Test func anExpiredCertificateIsRefusedWithTheDateAndTheClock() async throws {
        let ca = try TestCA()
        let identity = try ca.issue(["127.0.0.1"], from: Date() - 3 * 86400, until: Date() - 86400)
        let text = refusal(try await get(identity, trust: TLSTrust(caFile: try ca.writePEM(in: folder))))
        #expect(text.hasPrefix("certificate for 127.0.0.1 is not trusted: it expired on "))
        #expect(text.contains("fix the clock (timedatectl)"))
    }

    @Test func aCertificateNotValidYetIsRefusedPointingAtTheClock() async throws {
        let ca = try TestCA()
        let identity = try ca.issue(["127.0.0.1"], from: Date() + 86400, until: Date() + 3 * 86400)
        let text = refusal(try await get(identity, trust: TLSTrust(caFile: try ca.writePEM(in: folder))))
        #expect(text.contains("it is valid only from "))
        #expect(text.contains("fix the clock"))
    }

    @Test func aCertificateForAnotherHostIsRefusedNamingWhatItIsFor() async throws {
        let ca = try TestCA()
        let identity = try ca.issue(["photolala.invalid"])
        let text = refusal(try await get(identity, trust: TLSTrust(caFile: try ca.writePEM(in: folder))))
        #expect(text == "certificate for 127.0.0.1 is not trusted: it is for photolala.invalid, not 127.0.0.1; "
            + "use a name the certificate carries in the URL, or give the server a certificate for 127.0.0.1")
    }

    @Test func aCAFileThatCannotBeReadFailsTheRequestNamingIt() async throws {
        let identity = try TestCA().issue(["127.0.0.1"])
        let missing = folder.appendingPathComponent("gone.pem").path
        let text = refusal(try await get(identity, trust: TLSTrust(caFile: missing)))
        #expect(text.hasPrefix("tls.ca_file \(missing) cannot be used"))
    }

    @Test func anEmptyCAFileSettingMeansTheSystemStoreOnly() {
        #expect(TLSTrust(caFile: "") == .system)
        #expect(TLSTrust(caFile: nil).configuration.additionalTrustRoots.isEmpty)
    }
}
