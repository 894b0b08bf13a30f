import Foundation
import SwiftASN1
import X509

/// What a server's certificate says about itself: enough to tell a user why it was
/// refused. Read from the DER bytes with swift-certificates.
package struct PeerCertificate: Sendable, Equatable {
    package var subject: String
    package var issuer: String
    /// Its subject alternative names: DNS names and IP addresses, as text.
    package var names: [String]
    package var notBefore: Date
    package var notAfter: Date

    package init(subject: String, issuer: String, names: [String], notBefore: Date, notAfter: Date) {
        self.subject = subject
        self.issuer = issuer
        self.names = names
        self.notBefore = notBefore
        self.notAfter = notAfter
    }

    package init(der: [UInt8]) throws {
        let certificate = try Certificate(derEncoded: der)
        subject = certificate.subject.description
        issuer = certificate.issuer.description
        notBefore = certificate.notValidBefore
        notAfter = certificate.notValidAfter
        let alternatives = (try? certificate.extensions.subjectAlternativeNames) ?? nil
        names = alternatives.map { $0.compactMap(Self.text) } ?? []
    }

    /// A self-signed certificate names itself as its issuer.
    package var selfIssued: Bool { subject == issuer }

    static func text(_ name: GeneralName) -> String? {
        switch name {
        case .dnsName(let dns):
            return dns
        case .ipAddress(let octets):
            return Self.address(octets.bytes)
        default:
            return nil
        }
    }

    package static func address(_ bytes: ArraySlice<UInt8>) -> String? {
        switch bytes.count {
        case 4:
            return bytes.map(String.init).joined(separator: ".")
        case 16:
            let groups = stride(from: bytes.startIndex, to: bytes.endIndex, by: 2).map {
                String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16)
            }
            return groups.joined(separator: ":")
        default:
            return nil
        }
    }
}
