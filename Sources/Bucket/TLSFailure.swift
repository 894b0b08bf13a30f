import NIOSSL

/// A TLS failure, recognised among the errors a request can end with.
package enum TLSFailure: Sendable, Equatable {
    /// The chain did not verify: an unknown or self-signed CA, an expired certificate or
    /// one not valid yet. BoringSSL does not say which (`CERTIFICATE_VERIFY_FAILED`).
    case certificateRejected
    /// The chain verified but the certificate does not name the host.
    case wrongHost
    /// `tls.ca_file` could not be loaded into the TLS context.
    case caFileUnusable(String)
    /// The handshake failed otherwise (a plain-HTTP server, no common protocol version);
    /// the associated value is BoringSSL's reason.
    case handshake(String)

    package init?(_ error: any Error) {
        if let error = error as? NIOSSLExtraError {
            guard error == .failedToValidateHostname else { return nil }
            self = .wrongHost
            return
        }
        guard let error = error as? NIOSSLError else { return nil }
        switch error {
        case .handshakeFailed(let underlying):
            let reasons = Self.reasons(in: "\(underlying)")
            self = reasons.contains("CERTIFICATE_VERIFY_FAILED") ? .certificateRejected
                : .handshake(reasons.isEmpty ? "\(underlying)" : reasons.joined(separator: ", "))
        case .noCertificateToValidate, .unableToValidateCertificate, .cannotMatchULabel:
            self = .certificateRejected
        case .failedToLoadCertificate, .noSuchFilesystemObject:
            self = .caFileUnusable("\(error)")
        default:
            return nil
        }
    }

    /// BoringSSL's reason codes from an error stack's text: in
    /// `error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at file:line`
    /// the word after the fourth colon.
    package static func reasons(in text: String) -> [String] {
        var found: [String] = []
        for match in text.matches(of: /error:[0-9a-fA-F]+:[^:]*:[^:]*:([A-Z0-9_]+)/) {
            let reason = String(match.output.1)
            if !found.contains(reason) { found.append(reason) }
        }
        return found
    }
}
