import COpenSSL

/// SHA-256 through OpenSSL's EVP interface, one-shot or fed in pieces, so a file of any
/// size is hashed with a fixed buffer (SigV4 payload hashes over plain HTTP).
///
/// Non-copyable because it owns an `EVP_MD_CTX`: a copy would share (and double-free)
/// the context. It is `Sendable` for the same reason: ownership moves, never shares.
public struct SHA256: ~Copyable, @unchecked Sendable {
    public static let byteCount = 32

    private let context: OpaquePointer

    public init() {
        // Allocation only fails when memory is exhausted; nothing sensible is left to do then.
        guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
        self.context = context
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    public mutating func update(_ text: String) {
        var text = text
        text.withUTF8 { update(UnsafeRawBufferPointer($0)) }
    }

    /// The digest so far; the context starts over (for holders that cannot consume it).
    public mutating func finalize() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Self.byteCount)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &out, &length)
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
        return out
    }

    /// The 32-byte digest; the context is spent.
    public consuming func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Self.byteCount)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &out, &length)
        return out
    }

    /// Lowercase hex of the digest (what SigV4 puts in canonical requests); the context is spent.
    public consuming func finishHex() -> String {
        sha256HexEncoded(finish())
    }

    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var hash = SHA256()
        hash.update(bytes)
        return hash.finish()
    }

    public static func digest(_ text: String) -> [UInt8] {
        var hash = SHA256()
        hash.update(text)
        return hash.finish()
    }

    public static func hexDigest(_ bytes: [UInt8]) -> String {
        sha256HexEncoded(digest(bytes))
    }

    public static func hexDigest(_ text: String) -> String {
        sha256HexEncoded(digest(text))
    }
}

/// Lowercase hex; internal and oddly named on purpose so it never collides with the
/// module's public hex helper.
func sha256HexEncoded(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes {
        out.append(digits[Int(b >> 4)])
        out.append(digits[Int(b & 0x0f)])
    }
    return String(decoding: out, as: UTF8.self)
}
