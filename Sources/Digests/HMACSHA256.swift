import COpenSSL

/// HMAC-SHA256 through OpenSSL's one-shot `HMAC()` (not deprecated in OpenSSL 3, unlike
/// `HMAC_CTX`). SigV4 only ever MACs short strings, so no incremental form is needed.
package enum HMACSHA256: Sendable {
    package static let byteCount = 32

    package static func authenticationCode(key: [UInt8], message: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        // An empty buffer may have a nil base address; OpenSSL wants a pointer regardless.
        var empty: UInt8 = 0
        let result = key.withUnsafeBytes { keyBytes in
            withUnsafeMutablePointer(to: &empty) { emptyPointer in
                HMAC(EVP_sha256(),
                     keyBytes.baseAddress ?? UnsafeRawPointer(emptyPointer), Int32(keyBytes.count),
                     message.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(emptyPointer),
                     message.count, &out, &length)
            }
        }
        precondition(result != nil && length == UInt32(byteCount), "HMAC-SHA256 failed in OpenSSL")
        return out
    }

    package static func authenticationCode(key: [UInt8], message: [UInt8]) -> [UInt8] {
        message.withUnsafeBytes { authenticationCode(key: key, message: $0) }
    }

    package static func authenticationCode(key: [UInt8], message: String) -> [UInt8] {
        var message = message
        return message.withUTF8 { authenticationCode(key: key, message: UnsafeRawBufferPointer($0)) }
    }

    package static func hexAuthenticationCode(key: [UInt8], message: String) -> String {
        Hex.string(authenticationCode(key: key, message: message))
    }
}
