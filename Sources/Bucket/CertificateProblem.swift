import Foundation

/// Why a server's certificate was refused, as far as its own fields tell, and the
/// sentence that says what to do about it. Pure: the certificate and the time come in.
package enum CertificateProblem: Sendable, Equatable {
    case expired(notAfter: Date, now: Date)
    case notYetValid(notBefore: Date, now: Date)
    case wrongHost(names: [String])
    /// The chain leads to no CA the system store or `tls.ca_file` holds.
    case untrusted(issuer: String, selfSigned: Bool)
    /// The certificate could not be fetched to look at (the server went away meanwhile).
    case unexplained(TLSFailure)

    /// Dates first: an expired certificate is refused whoever issued it, and a wrong
    /// clock here makes every certificate look expired or not yet valid.
    package static func diagnose(_ failure: TLSFailure, peer: PeerCertificate?, now: Date) -> CertificateProblem {
        guard let peer else { return .unexplained(failure) }
        if now > peer.notAfter { return .expired(notAfter: peer.notAfter, now: now) }
        if now < peer.notBefore { return .notYetValid(notBefore: peer.notBefore, now: now) }
        if failure == .wrongHost { return .wrongHost(names: peer.names) }
        return .untrusted(issuer: peer.issuer, selfSigned: peer.selfIssued)
    }

    package func sentence(host: String, caFile: String?) -> String {
        let lead = "certificate for \(host) is not trusted: "
        switch self {
        case let .expired(notAfter, now):
            return lead + "it expired on \(Self.day(notAfter)) and this machine's clock says \(Self.day(now)); "
                + "if that date is wrong, fix the clock (timedatectl), otherwise the server needs a new certificate"
        case let .notYetValid(notBefore, now):
            return lead + "it is valid only from \(Self.day(notBefore)) and this machine's clock says \(Self.day(now)); "
                + "fix the clock (timedatectl)"
        case .wrongHost(let names):
            let carried = names.isEmpty ? "no host name at all" : names.joined(separator: ", ")
            return lead + "it is for \(carried), not \(host); use a name the certificate carries in the URL, "
                + "or give the server a certificate for \(host)"
        case let .untrusted(issuer, selfSigned):
            let file = caFile.map { "tls.ca_file (\($0))" } ?? "tls.ca_file (not set)"
            let by = selfSigned ? "it is self-signed (\(issuer))" : "it was issued by \(issuer)"
            return lead + "\(by), and neither the system's CA store nor \(file) vouches for it; "
                + "if this is your own server or a private CA, set tls.ca_file to its CA certificate (PEM) and reload"
        case .unexplained(let failure):
            let what = failure == .wrongHost ? "it does not name this host" : "its chain did not verify"
            return lead + "\(what), and it could not be fetched again to say more; check tls.ca_file, "
                + "the server's certificate and this machine's clock"
        }
    }

    static func day(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm 'UTC'"
        return formatter.string(from: date)
    }
}
