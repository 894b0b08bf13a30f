/// Who did what (cli.md "audit"): an event as a part of the daemon reports it. The trail
/// (the `Audit` module) numbers, stamps and chains it; a part is given an `AuditRecorder`
/// and needs nothing else, so no stage imports the trail.
package struct AuditEvent: Sendable, Equatable {
    /// cli.md's list, and nothing else.
    package enum Kind: String, Sendable, Codable, CaseIterable {
        case login, logout
        case controlRefused = "control.refused"
        case pause, resume, rescan, retry, restore, verify
        case recoveryKeyShown = "recovery-key.shown"
        case recoveryKeyEntered = "recovery-key.entered"
        case recoveryKeyRefused = "recovery-key.refused"
        case recoveryKeyRotated = "recovery-key.rotated"
        case configReload = "config.reload"
        case appleState = "apple.state"
        case credentialsRefused = "credentials.refused"
        case s3Delete = "s3.delete"
        case catalogReplaced = "catalog.replaced"
        case notifyFailed = "notify.failed"
        /// A manifest object refused: a downgrade, a replay, a gap, or one that does not
        /// authenticate (details: the device id and why).
        case manifestRefused = "manifest.refused"
        /// The key object was not written by a holder of the account key (or was an older
        /// copy put back): this NAS wrote its own over it.
        case keyObjectRepaired = "key-object.repaired"
        case recoveryKeyNewAccountKey = "recovery-key.new-account-key"
        /// A change made on the status page (web.md): the action and the session's remote address.
        case webChange = "web.change"
        /// Root was shown the audit trail's verification key (`audit --verification-key`).
        case auditVerificationKeyShown = "audit.verification-key.shown"
        /// The mirror moved copies into `.trash/` (details: count).
        case mirrorTrash = "mirror.trash"
        /// `photolalactl mirror --refill` (details: count).
        case mirrorRefill = "mirror.refill"
        /// The mirror refused an object (details: key, why).
        case mirrorRefused = "mirror.refused"
    }

    package var kind: Kind
    package var actor: AuditActor
    package var outcome: AuditOutcome
    package var details: AuditDetails

    package init(_ kind: Kind, by actor: AuditActor, _ outcome: AuditOutcome, _ details: AuditDetails = [:]) {
        self.kind = kind
        self.actor = actor
        self.outcome = outcome
        self.details = details
    }
}

/// Takes events from any part of the daemon. Never waits and never fails: a trail that
/// cannot write says so in the journal, and the part goes on with its work.
package protocol AuditRecorder: Sendable {
    func record(_ event: AuditEvent)
}

/// Who: a caller on the control socket (the uid the kernel gave, SO_PEERCRED), the daemon
/// itself, or systemd (a reload by SIGHUP).
package enum AuditActor: Sendable, Equatable, Codable {
    /// `user` is the name the trail looked up when it wrote the record (nil: none in the
    /// user database); parts give the uid alone.
    case caller(uid: UInt32, user: String? = nil)
    case daemon
    case systemd

    private enum Keys: String, CodingKey { case uid, user }

    package init(from decoder: any Decoder) throws {
        if let word = try? decoder.singleValueContainer().decode(String.self) {
            switch word {
            case "daemon": self = .daemon
            case "systemd": self = .systemd
            default: throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "unknown actor \(word)"))
            }
            return
        }
        let c = try decoder.container(keyedBy: Keys.self)
        self = .caller(uid: try c.decode(UInt32.self, forKey: .uid), user: try c.decodeIfPresent(String.self, forKey: .user))
    }

    package func encode(to encoder: any Encoder) throws {
        switch self {
        case let .caller(uid, user):
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(uid, forKey: .uid)
            if let user { try c.encode(user, forKey: .user) } else { try c.encodeNil(forKey: .user) }
        case .daemon:
            var c = encoder.singleValueContainer()
            try c.encode("daemon")
        case .systemd:
            var c = encoder.singleValueContainer()
            try c.encode("systemd")
        }
    }
}

package enum AuditOutcome: String, Sendable, Codable {
    case ok, refused, failed
}

/// A detail's value: words, a count or a yes/no — never a nested object, so a record
/// stays one small line and a summary can show it.
package enum AuditValue: Sendable, Equatable, Codable, CustomStringConvertible {
    case string(String)
    case int(Int64)
    case bool(Bool)

    package init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let b = try? c.decode(Bool.self) { self = .bool(b) } else if let i = try? c.decode(Int64.self) { self = .int(i) } else {
            self = .string(try c.decode(String.self))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let s): try c.encode(s)
        case .int(let i): try c.encode(i)
        case .bool(let b): try c.encode(b)
        }
    }

    package var description: String {
        switch self {
        case .string(let s): s
        case .int(let i): "\(i)"
        case .bool(let b): b ? "yes" : "no"
        }
    }
}

/// What happened, as a few named values (`["call": "POST /v1/pause"]`). Never a token,
/// key, recovery key or Apple id: the trail replaces any value the log redactor knows.
package struct AuditDetails: Sendable, Equatable, Codable, ExpressibleByDictionaryLiteral {
    package private(set) var values: [String: AuditValue]

    package init(_ values: [String: AuditValue] = [:]) {
        self.values = values
    }

    package init(dictionaryLiteral elements: (String, AuditValue)...) {
        self.values = Dictionary(elements, uniquingKeysWith: { _, last in last })
    }

    package subscript(key: String) -> AuditValue? {
        get { values[key] }
        set { values[key] = newValue }
    }

    package var isEmpty: Bool { values.isEmpty }

    package init(from decoder: any Decoder) throws {
        values = try decoder.singleValueContainer().decode([String: AuditValue].self)
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(values)
    }
}

extension AuditValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    package init(stringLiteral value: String) { self = .string(value) }
    package init(integerLiteral value: Int64) { self = .int(value) }
    package init(booleanLiteral value: Bool) { self = .bool(value) }
}

/// One line of `state_dir/audit.log` as read back (cli.md "audit"): the event, its number,
/// when, and the hex SHA-256 of the line before it.
package struct AuditRecord: Sendable, Equatable, Codable {
    package var seq: Int64
    package var at: String
    package var event: AuditEvent.Kind
    package var actor: AuditActor
    package var outcome: AuditOutcome
    package var details: AuditDetails
    package var prev: String

    package init(seq: Int64, at: String, event: AuditEvent.Kind, actor: AuditActor, outcome: AuditOutcome, details: AuditDetails, prev: String) {
        self.seq = seq
        self.at = at
        self.event = event
        self.actor = actor
        self.outcome = outcome
        self.details = details
        self.prev = prev
    }
}
