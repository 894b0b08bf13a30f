import Foundation
import NIOCore
import NIOSSL

/// What the HTTP clients trust: the system's CA store, plus the certificates of
/// `tls.ca_file` when it is set (a private S3, a test CA). Both clients put it on every
/// request rather than on the client, so a reload that changes the file takes effect
/// with the next connection, and connections made under the old trust are never reused
/// under the new one (the connection pool is keyed by it).
package struct TLSTrust: Sendable, Equatable {
    /// The PEM file of extra CA certificates, as configured.
    package let caFile: String?
    /// The file's certificates as read when the settings were loaded. When they could not
    /// be read then, NIOSSL is given the path and the failure surfaces on the request,
    /// where `explain` names the file: never a silent fall-back to the system store alone.
    let extraRoots: NIOSSLAdditionalTrustRoots?

    package init(caFile: String?) {
        let path = caFile.flatMap { $0.isEmpty ? nil : $0 }
        self.caFile = path
        guard let path else {
            extraRoots = nil
            return
        }
        if let certificates = try? NIOSSLCertificate.fromPEMFile(path), !certificates.isEmpty {
            extraRoots = .certificates(certificates)
        } else {
            extraRoots = .file(path)
        }
    }

    /// The system's store only.
    package static let system = TLSTrust(caFile: nil)

    /// A client configuration that verifies the chain, the validity dates and the host
    /// name against this trust, with TLS 1.2 at least.
    package var configuration: TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        configuration.certificateVerification = .fullVerification
        configuration.trustRoots = .default
        configuration.additionalTrustRoots = extraRoots.map { [$0] } ?? []
        return configuration
    }

    /// A sentence for the user when `error` is a TLS failure talking to `host:port`,
    /// saying what is wrong and what to do; nil when it is not a TLS failure. A rejected
    /// certificate is fetched once more, unverified, to tell an expired one from a wrong
    /// host name or an unknown CA (BoringSSL reports them all as CERTIFICATE_VERIFY_FAILED).
    package func explain(_ error: any Error, host: String, port: Int) async -> String? {
        guard let failure = TLSFailure(error) else { return nil }
        switch failure {
        case .caFileUnusable(let detail):
            return "tls.ca_file \(caFile ?? "") cannot be used (\(detail)): make it a readable PEM file of CA "
                + "certificates and reload (systemctl reload photolalad)"
        case .handshake(let reason):
            return "TLS with \(host) failed (\(reason)): check that the endpoint is an https:// server and speaks TLS 1.2 or later"
        case .certificateRejected, .wrongHost:
            let peer = await CertificateProbe.peerCertificate(host: host, port: port)
            let problem = CertificateProblem.diagnose(failure, peer: peer, now: Date())
            return problem.sentence(host: host, caFile: caFile)
        }
    }
}
