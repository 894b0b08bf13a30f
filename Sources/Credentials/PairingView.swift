import Foundation

extension AccountService {
    /// How a pairing stands, as `photolalactl login` shows it.
    package struct PairingView: Sendable {
        package var outcome: String
        package var userCode: String?
        package var verificationUri: String?
        package var verificationUriComplete: String?
        package var expiresAt: Date?
        package var userId: String?
        package var message: String?
    }
}
