import COpenSSL

/// SHA-256 through OpenSSL's EVP interface, one-shot or fed in pieces, so a file of any
/// size is hashed with a fixed buffer (SigV4 payload hashes over plain HTTP).
///
/// Non-copyable because it owns an `EVP_MD_CTX`: a copy would share (and double-free)
/// the context. It is `Sendable` for the same reason: ownership moves, never shares.
package struct SHA256: ~Copyable, @unchecked Sendable {
    package static let byteCount = 32

    private var context = EVPDigest(EVP_sha256(), byteCount: SHA256.byteCount)

    package init() {}

    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        context.update(bytes)
    }

    package mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    package mutating func update(_ text: String) {
        var text = text
        text.withUTF8 { update(UnsafeRawBufferPointer($0)) }
    }

    /// The digest so far; the context starts over (for holders that cannot consume it).
    package mutating func finalize() -> [UInt8] {
        context.finalize()
    }

    /// The 32-byte digest; the context is spent.
    package consuming func finish() -> [UInt8] {
        context.finish()
    }

    /// Lowercase hex of the digest (what SigV4 puts in canonical requests); the context is spent.
    package consuming func finishHex() -> String {
        Hex.string(finish())
    }

    package static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var hash = SHA256()
        hash.update(bytes)
        return hash.finish()
    }

    package static func digest(_ text: String) -> [UInt8] {
        var hash = SHA256()
        hash.update(text)
        return hash.finish()
    }

    package static func hexDigest(_ bytes: [UInt8]) -> String {
        Hex.string(digest(bytes))
    }

    package static func hexDigest(_ text: String) -> String {
        Hex.string(digest(text))
    }
}
