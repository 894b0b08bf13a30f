/// Hashing: streaming digests over OpenSSL EVP with a fixed buffer: MD5 of files, SHA-256 and HMAC for signing.
import COpenSSL

/// Incremental MD5 through OpenSSL's EVP interface (the same code path md5sum-class tools use).
public struct MD5: ~Copyable {
    private let context: OpaquePointer

    public init() {
        context = EVP_MD_CTX_new()
        EVP_DigestInit_ex(context, EVP_md5(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The 16-byte digest; the context is spent.
    public consuming func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &out, &length)
        return out
    }

    /// The digest so far; the context starts over (for holders that cannot consume it).
    public mutating func finalize() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &out, &length)
        EVP_DigestInit_ex(context, EVP_md5(), nil)
        return out
    }

    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var m = MD5()
        m.update(bytes)
        return m.finish()
    }
}

public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// Lowercase hex, as S3 keys and ETags spell digests.
    public static func string(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func bytes(_ hex: String) -> [UInt8]? {
        let chars = Array(hex.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let hi = value(chars[i]), let lo = value(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    private static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: c - 48
        case 97...102: c - 87
        case 65...70: c - 55
        default: nil
        }
    }
}
