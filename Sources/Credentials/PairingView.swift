import Foundation

extension AccountService {
    /// How a pairing stands, as `photolalactl login` shows it.
    public struct PairingView: Sendable {
        public var outcome: String
        public var userCode: String?
        public var verificationUri: String?
        public var verificationUriComplete: String?
        public var expiresAt: Date?
        public var userId: String?
        public var message: String?
    }
}
