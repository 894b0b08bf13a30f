import Foundation
import PhotolalaCore

/// `photolalactl recovery-key [--json]` and `--rotate` (privacy.md): the key, the account
/// key's fingerprint and when the recovery key was made. Only ever sent to root or the
/// daemon's user, and printed by the command; never logged.
package struct RecoveryKeyView: Codable, Sendable, Equatable {
    package var recoveryKey: String
    package var fingerprint: String
    package var createdAt: String
    /// This NAS's copy no longer opens the key object in the bucket (rotated on another NAS).
    package var outdated: Bool
    /// `--new-account-key`: the account key it replaced, and how many objects of how many
    /// devices were sealed again under the new one.
    package var previousFingerprint: String?
    package var sealed: Int?
    package var devices: Int?
    /// Objects that opened under neither key and were left as they were.
    package var unreadable: [String]?

    package init(recoveryKey: String, fingerprint: String, createdAt: String, outdated: Bool, previousFingerprint: String? = nil,
                 sealed: Int? = nil, devices: Int? = nil, unreadable: [String]? = nil) {
        self.recoveryKey = recoveryKey
        self.fingerprint = fingerprint
        self.createdAt = createdAt
        self.outdated = outdated
        self.previousFingerprint = previousFingerprint
        self.sealed = sealed
        self.devices = devices
        self.unreadable = unreadable
    }
}

/// `photolalactl recovery-key --enter`: the key as read from standard input, in the body.
package struct RecoveryKeyEntry: Codable, Sendable {
    package var recoveryKey: String

    package init(recoveryKey: String) {
        self.recoveryKey = recoveryKey
    }
}

/// `photolalactl audit --verification-key [--json]` (cli.md): the key while it was never
/// shown, else when it was; root only, printed by the command, never logged.
package struct VerificationKeyView: Codable, Sendable, Equatable {
    @Null package var verificationKey: String?
    package var fingerprint: String
    package var createdAt: String
    @Null package var shownAt: String?

    package init(verificationKey: String?, fingerprint: String, createdAt: String, shownAt: String?) {
        self.verificationKey = verificationKey
        self.fingerprint = fingerprint
        self.createdAt = createdAt
        self.shownAt = shownAt
    }
}

/// The command printed the key whose fingerprint this is: the NAS may forget it.
package struct VerificationKeyTaken: Codable, Sendable, Equatable {
    package var fingerprint: String
    package init(fingerprint: String) {
        self.fingerprint = fingerprint
    }
}
