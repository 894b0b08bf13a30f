import Foundation
import Synchronization

/// Every secret the daemon holds is registered here, and every log line is scrubbed of
/// them before it is written: a second line of defence behind never logging them at all.
package final class SecretRedactor: Sendable {
    package static let shared = SecretRedactor()
    /// Longest first: a secret that holds another (an identity token and its payload) is
    /// replaced whole, not around the shorter one's `[redacted]`.
    private let secrets = Mutex<[String]>([])

    package init() {}

    package func register(_ secret: String?) {
        guard let secret, secret.count >= 6 else { return }
        secrets.withLock { s in
            guard !s.contains(secret) else { return }
            s.insert(secret, at: s.firstIndex { $0.count < secret.count } ?? s.endIndex)
        }
    }

    package func redact(_ text: String) -> String {
        let current = secrets.withLock { $0 }
        guard !current.isEmpty else { return text }
        var out = text
        for s in current where out.contains(s) {
            out = out.replacingOccurrences(of: s, with: "[redacted]")
        }
        return out
    }
}
