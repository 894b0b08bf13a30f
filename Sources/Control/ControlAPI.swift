import Foundation
/// Control: the control socket: HTTP/1.1 over a Unix socket, its server with peer-credential checks, and the CLI's client.
import PhotolalaCore

/// The versioned calls of the local API, one path each (as tailscale's LocalAPI does),
/// with the access each needs: members of `daemon.socket_group` may read, only root
/// or the daemon's own user may change anything.
package enum ControlRoute: String, Sendable, CaseIterable {
    case status = "GET /v1/status"
    /// The Prometheus text exposition of the same snapshot, plus the counters.
    case metrics = "GET /v1/metrics"
    case queue = "GET /v1/queue"
    case pause = "POST /v1/pause"
    case resume = "POST /v1/resume"
    case rescan = "POST /v1/rescan"
    case retry = "POST /v1/retry"
    case logout = "POST /v1/logout"
    case loginIdentityToken = "POST /v1/login/identity-token"
    case loginDeviceStart = "POST /v1/login/device"
    case loginDevicePoll = "GET /v1/login/device"
    case loginDeviceCancel = "DELETE /v1/login/device"
    case verify = "POST /v1/verify"
    case verifyProgress = "GET /v1/verify"
    /// A read with a body (the path and where the page starts), hence POST.
    case files = "POST /v1/files"
    // Restoring (cli.md): what the bucket holds of this account's devices, and the bytes.
    case devices = "GET /v1/devices"
    case manifest = "GET /v1/manifest"
    case restoreObjects = "POST /v1/restore/objects"
    case restoreListing = "GET /v1/restore/listing"
    case restoreThaw = "POST /v1/restore/thaw"
    case restoreObject = "GET /v1/restore/object"
    case restoreSession = "POST /v1/restore/session"
    /// `restore --by-date`: every photo object of the account, listed for the command
    /// (a read: `--dry-run` is for the group too), and its start and end, for the audit trail.
    case restoreExport = "GET /v1/restore/export"
    case restoreExportReport = "POST /v1/restore/export/report"
    /// `photolalactl notify --test`: sends to the owner, so root or the daemon's user only.
    case notifyTest = "POST /v1/notify/test"
    // Who did what (cli.md "audit"): for root and the daemon's user alone.
    case audit = "GET /v1/audit"
    case auditVerify = "GET /v1/audit/verify"
    /// What `audit --verify --verification-key` checks, sent to the command (`AuditMaterial`).
    case auditSealed = "GET /v1/audit/sealed"
    /// `audit --verification-key`: root alone is shown the key, once; the command says it
    /// printed it (`taken`), and the NAS forgets it.
    case auditVerificationKey = "GET /v1/audit/verification-key"
    case auditVerificationKeyTaken = "POST /v1/audit/verification-key/taken"
    // The account's recovery key (privacy.md): shown, entered (the key in the body, never in
    // the query), replaced. Root and the daemon's user only, even to look.
    case recoveryKey = "GET /v1/recovery-key"
    case recoveryKeyEnter = "POST /v1/recovery-key/enter"
    case recoveryKeyRotate = "POST /v1/recovery-key/rotate"
    /// `--rotate --new-account-key`: answers once every object is sealed again under it.
    case recoveryKeyNewAccountKey = "POST /v1/recovery-key/new-account-key"
    // The status page (web.md): a one-time link that opens a session, and ending every
    // session. Root and the daemon's user only: a session may pause, sign in and out.
    case webLink = "POST /v1/web/link"
    case webRevoke = "POST /v1/web/revoke"
    // The mirror (mirror.md): what it holds and waits for (the group may look; names of
    // files only for root and the daemon's user), a pass now, the copies removed here
    // fetched again.
    case mirror = "GET /v1/mirror"
    case mirrorPass = "POST /v1/mirror/pass"
    case mirrorRefill = "POST /v1/mirror/refill"

    /// `trail`: a read kept from the group, since it tells who did what (the audit trail);
    /// `root`: root alone, not even the daemon's user (the trail's verification key, which
    /// must not be in the hands of the user whose files it checks).
    package enum Access: Sendable { case read, write, trail, root }

    package var access: Access {
        switch self {
        case .status, .queue, .metrics, .verifyProgress, .files, .mirror: .read
        // `restore --dry-run` is a read: the group may see what a restore would bring back.
        case .devices, .manifest, .restoreObjects, .restoreListing, .restoreExport: .read
        case .audit, .auditVerify, .auditSealed: .trail
        case .auditVerificationKey, .auditVerificationKeyTaken: .root
        default: .write
        }
    }

    /// A call whose answer is read from the database or the bucket, possibly at length (a
    /// listing, a manifest), rather than from what the daemon holds in memory: a member's
    /// such calls take turns (`MemberLanes`).
    package var readsMuch: Bool {
        switch self {
        case .status, .metrics, .verifyProgress, .loginDevicePoll: false
        default: true
        }
    }

    package var method: String { String(rawValue.split(separator: " ")[0]) }
    package var path: String { String(rawValue.split(separator: " ")[1]) }

    package init?(method: String, path: String) {
        self.init(rawValue: "\(method) \(path)")
    }
}

/// A request as the handler sees it: the route, its query and its (small, bounded) JSON body.
package struct ControlRequest: Sendable {
    package var route: ControlRoute
    package var query: [String: String]
    package var body: [UInt8]
    package var peer: PeerCredentials
    /// Root or the daemon's user: sees every name. Anyone else is a member of the socket
    /// group, shown only names below folders it could list (privacy.md "No side doors").
    package var privileged: Bool

    package init(route: ControlRoute, query: [String: String] = [:], body: [UInt8] = [], peer: PeerCredentials, privileged: Bool = true) {
        self.route = route
        self.query = query
        self.body = body
        self.peer = peer
        self.privileged = privileged
    }

    /// Who asked, as the audit trail names a caller (the uid the kernel gave the socket).
    package var caller: AuditActor { .caller(uid: peer.uid) }
}

package struct ControlResponse: Sendable {
    package var status: Int
    package var body: [UInt8]
    package var contentType: String
    /// A body produced while it is sent (see `ControlStream`); `status` and `body` are then unused.
    package var stream: ControlStream?

    package init(status: Int, body: [UInt8], contentType: String = "application/json") {
        self.status = status
        self.body = body
        self.contentType = contentType
        self.stream = nil
    }

    package static func stream(_ produce: @escaping @Sendable (ControlStreamWriter) async -> Void) -> ControlResponse {
        var r = ControlResponse(status: 200, body: [])
        r.stream = ControlStream(produce)
        return r
    }

    package static func json<T: Encodable>(_ value: T, status: Int = 200) -> ControlResponse {
        ControlResponse(status: status, body: (try? ControlJSON.encode(value)) ?? Array("{}".utf8))
    }

    package static func error(_ status: Int, _ code: String, _ message: String) -> ControlResponse {
        json(ControlReply(ok: false, error: code, message: message), status: status)
    }
}

/// The answer to a command that changes something: what happened, in words.
package struct ControlReply: Codable, Sendable, Equatable {
    package var ok: Bool
    package var error: String?
    package var message: String
    package init(ok: Bool, error: String? = nil, message: String) {
        self.ok = ok
        self.error = error
        self.message = message
    }
}

/// `photolalactl queue --json`: newest first, at most `limit`.
package struct QueueListing: Codable, Sendable, Equatable {
    package struct Item: Codable, Sendable, Equatable {
        package var path: String
        package var state: String
        package var size: Int64
        @Null package var md5: String?
        package var attempts: Int
        @Null package var lastError: String?
        @Null package var updatedAt: String?

        package init(path: String, state: String, size: Int64, md5: String?, attempts: Int, lastError: String?, updatedAt: String?) {
            self.path = path
            self.state = state
            self.size = size
            self.md5 = md5
            self.attempts = attempts
            self.lastError = lastError
            self.updatedAt = updatedAt
        }

    }

    package var items: [Item]
    package var total: Int
    package init(items: [Item], total: Int) {
        self.items = items
        self.total = total
    }
}

/// `photolalactl logout [--forget-key]`: the body is optional (an empty one keeps the key rule).
package struct LogoutRequest: Codable, Sendable, Equatable {
    /// Log out even when this NAS holds the account key and its recovery key was never shown here.
    package var forgetKey: Bool
    package init(forgetKey: Bool = false) {
        self.forgetKey = forgetKey
    }
}

/// `photolalactl login --identity-token T [--authorization-code C]`.
package struct IdentityTokenLogin: Codable, Sendable {
    package var identityToken: String
    package var authorizationCode: String?
    package init(identityToken: String, authorizationCode: String?) {
        self.identityToken = identityToken
        self.authorizationCode = authorizationCode
    }
}

/// Where a sign-in stands; the CLI polls this while the user confirms on the phone.
package struct LoginProgress: Codable, Sendable, Equatable {
    package enum State: String, Codable, Sendable { case pending, signedIn, denied, expired, failed, cancelled, none }
    package var state: State
    package var userCode: String?
    package var verificationUri: String?
    package var verificationUriComplete: String?
    package var expiresAt: String?
    package var userId: String?
    package var message: String?
    /// Once signed in: the account key's state (`recovery.state` of status), and whether
    /// this sign-in made the account key (then `login` says to keep the recovery key).
    package var recovery: DaemonStatus.Recovery.State?
    package var accountKeyCreated: Bool?

    package init(state: State, userCode: String? = nil, verificationUri: String? = nil, verificationUriComplete: String? = nil,
                expiresAt: String? = nil, userId: String? = nil, message: String? = nil) {
        self.state = state
        self.userCode = userCode
        self.verificationUri = verificationUri
        self.verificationUriComplete = verificationUriComplete
        self.expiresAt = expiresAt
        self.userId = userId
        self.message = message
    }
}

/// One JSON style for the wire and `--json` output: sorted keys, ISO dates, no escaped slashes.
package enum ControlJSON {
    package static func encode<T: Encodable>(_ value: T, pretty: Bool = false) throws -> [UInt8] {
        let e = JSONEncoder()
        e.outputFormatting = pretty ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        return Array(try e.encode(value))
    }

    package static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try JSONDecoder().decode(type, from: Data(bytes))
    }
}
