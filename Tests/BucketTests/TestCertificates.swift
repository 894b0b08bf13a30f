import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A throw-away CA and the server certificates it (or nobody) signs, made in memory for
/// each test: what the e2e suites make with Python's `cryptography`, here in Swift.
struct TestCA {
    let key = P256.Signing.PrivateKey()
    let name: DistinguishedName
    let certificate: Certificate

    init(_ commonName: String = "Photolala Test CA", now: Date = Date()) throws {
        name = try DistinguishedName { CommonName(commonName) }
        certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: now - 3600, notValidAfter: now + 86400, issuer: name, subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                KeyUsage(keyCertSign: true)
            },
            issuerPrivateKey: .init(key))
    }

    /// A server certificate for `names` (DNS names, or IPv4 addresses as text).
    func issue(_ names: [String], from: Date = Date() - 3600, until: Date = Date() + 86400) throws -> ServerIdentity {
        let leafKey = P256.Signing.PrivateKey()
        let alternatives: [GeneralName] = names.map { name in
            let octets = name.split(separator: ".").compactMap { UInt8($0) }
            return octets.count == 4 ? .ipAddress(ASN1OctetString(contentBytes: ArraySlice(octets))) : .dnsName(name)
        }
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey),
            notValidBefore: from, notValidAfter: until, issuer: name,
            subject: try DistinguishedName { CommonName(names.first ?? "server") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                SubjectAlternativeNames(alternatives)
                try ExtendedKeyUsage([.serverAuth])
            },
            issuerPrivateKey: .init(key))
        return try ServerIdentity(leaf: leaf, key: leafKey)
    }

    func pem() throws -> String { try certificate.serializeAsPEM().pemString }

    /// Writes the CA certificate to a PEM file (what `tls.ca_file` names).
    func writePEM(in directory: URL) throws -> String {
        let path = directory.appendingPathComponent("ca-\(UUID().uuidString).pem").path
        try pem().write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}

struct ServerIdentity {
    let leaf: Certificate
    let certificate: NIOSSLCertificate
    let key: NIOSSLPrivateKey

    init(leaf: Certificate, key: P256.Signing.PrivateKey) throws {
        self.leaf = leaf
        certificate = try NIOSSLCertificate(bytes: Array(leaf.serializeAsPEM().pemString.utf8), format: .pem)
        self.key = try NIOSSLPrivateKey(bytes: Array(key.pemRepresentation.utf8), format: .pem)
    }

    var der: [UInt8] {
        get throws {
            var serializer = DER.Serializer()
            try serializer.serialize(leaf)
            return serializer.serializedBytes
        }
    }
}
