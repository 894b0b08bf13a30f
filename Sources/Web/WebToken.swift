import Crypto
import Foundation

/// The page's secrets: one-time link tokens and session tokens are 32 random bytes from the
/// kernel (getrandom through `SystemRandomNumberGenerator`), written base64url. Only their
/// SHA-256 is kept, in memory and on disk, so the sessions file opens nothing. The CSRF
/// token is an HMAC of the session token: the page holds it, the daemon recomputes it from
/// the cookie, and nothing about it is stored.
package enum WebToken {
    package static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return base64url(bytes)
    }

    package static func digest(_ token: String) -> String {
        SHA256.hash(data: Array(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    package static func csrf(forSession token: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Array("photolala web csrf".utf8), using: SymmetricKey(data: Array(token.utf8)))
        return base64url(Array(mac))
    }

    /// Compares without stopping at the first difference.
    package static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var diff: UInt8 = 0
        for i in x.indices { diff |= x[i] ^ y[i] }
        return diff == 0
    }

    /// Looks like a token (43 base64url characters) before anything is hashed or looked up.
    package static func wellFormed(_ token: String) -> Bool {
        token.utf8.count == 43 && token.utf8.allSatisfy { c in
            (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c == 45 || c == 95
        }
    }

    static func base64url(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
