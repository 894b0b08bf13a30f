import Foundation
import Synchronization

/// Every secret the daemon holds is registered here, and every log line is scrubbed of
/// them before it is written: a second line of defence behind never logging them at all.
package final class SecretRedactor: Sendable {
    package static let shared = SecretRedactor()
    private let secrets = Mutex<Set<String>>([])

    package func register(_ secret: String?) {
        guard let secret, secret.count >= 6 else { return }
        secrets.withLock { _ = $0.insert(secret) }
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
