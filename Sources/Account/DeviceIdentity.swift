#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// This NAS's own id (s3-layout.md): a UUID made at the first sign-in and kept in
/// `device-id` in the state directory (0600, written atomically), apart from the saved
/// sign-in so that `logout`, which erases `account.json`, keeps it. It names the NAS's
/// manifest in the bucket and is sent to the backend with every call; a new NAS (or a
/// deleted state directory) gets a new one.
package struct DeviceIdentity: Sendable {
    package let path: String

    package init(stateDir: String) {
        path = stateDir + "/device-id"
    }

    /// The saved id, or nil before the first sign-in (or when the file is not a UUID).
    package func load() -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return Self.isValid(text) ? text : nil
    }

    /// The saved id, made and saved first if there is none.
    package func loadOrCreate() throws(AccountStore.Failure) -> String {
        if let id = load() { return id }
        let id = UUID().uuidString.lowercased()
        try AccountStore.atomicWrite(Array((id + "\n").utf8), to: path)
        return id
    }

    /// The lowercase 8-4-4-4-12 form; anything else is not one of ours.
    package static func isValid(_ text: String) -> Bool {
        guard text.utf8.count == 36, let uuid = UUID(uuidString: text) else { return false }
        return uuid.uuidString.lowercased() == text
    }
}
