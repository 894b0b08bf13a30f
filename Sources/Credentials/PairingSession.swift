import Backend
import Foundation

/// A device pairing in progress (backend-api.md section 2): what the user must see, and
/// how the daemon's polling stands.
struct PairingSession: Sendable {
    var authorization: DeviceAuthorization
    var expiresAt: Date
    var interval: TimeInterval
    var outcome: Outcome = .pending
    var polls: Int = 0

    enum Outcome: Sendable, Equatable {
        case pending
        case signedIn(userId: String)
        case denied
        case expired
        case failed(String)
        case cancelled
    }
}
