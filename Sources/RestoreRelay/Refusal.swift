import Bucket
import Control
import PhotolalaCore

/// An answer the command can act on, for what goes wrong before the first byte: not
/// signed in, no grant now (paused, stopping), an object archived or missing.
package struct Refusal: Error {
    package var response: ControlResponse

    static let notSignedIn = Refusal(response: .error(
        409, "not_signed_in", "this NAS is not signed in: run `photolalactl login` first (with the Apple ID the devices were backed up with)"))

    static func unavailable(_ why: String) -> Refusal {
        Refusal(response: .error(503, "unavailable", why))
    }

    /// nil for a failure that is the bucket's (a 502 with the error's words).
    package init?(_ error: S3Error, key: String? = nil) {
        if error.kind == .unavailable {
            // `S3Error.unavailable` says why the grant source had none.
            let why: String
            switch error.message {
            case "not signed in": why = "this NAS is not signed in: run `photolalactl login`"
            case "stopping": why = "photolalad is stopping"
            default:
                let reason = error.message.hasPrefix("paused: ") ? DaemonStatus.PauseReason(rawValue: String(error.message.dropFirst(8))) : nil
                why = "the bucket cannot be reached now: \(reason?.explanation ?? error.message)"
            }
            self = .unavailable(why)
        } else if let key, error.code == "InvalidObjectState" {
            response = .error(409, "archived", "\(key) is in an archive class and must be asked back first")
        } else if let key, error.kind == .notFound {
            response = .error(404, "missing", "\(key) is not in the bucket")
        } else {
            return nil
        }
    }

    init(response: ControlResponse) {
        self.response = response
    }
}
