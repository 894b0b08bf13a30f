import Control
import Credentials
import Foundation
import PhotolalaCore
import Queue

/// Answers the control socket's calls by asking the daemon's parts.
struct DaemonControl: ControlHandler {
    let core: DaemonCore
    let hooks: DaemonHooks

    func handle(_ request: ControlRequest) async -> ControlResponse {
        switch request.route {
        case .status:
            return .json(await core.status())
        case .pause:
            do {
                try await core.setUserPaused(true)
                return .json(ControlReply(ok: true, message: "Uploads paused. Hashing goes on; run `photolalactl resume` to continue."))
            } catch {
                return .error(500, "internal", "could not save the pause: \(error)")
            }
        case .resume:
            do {
                try await core.setUserPaused(false)
                await hooks.resume()
                return .json(ControlReply(ok: true, message: "Uploads resumed."))
            } catch {
                return .error(500, "internal", "could not save the resume: \(error)")
            }
        case .rescan:
            return await hooks.rescan()
        case .queue:
            return await hooks.queue(request)
        case .retry:
            return await hooks.retry()
        case .logout:
            return await hooks.logout()
        case .loginIdentityToken, .loginDeviceStart, .loginDevicePoll, .loginDeviceCancel:
            return await hooks.login(request)
        }
    }
}

/// The calls that belong to parts wired in by the daemon (ingest, upload, account).
/// Each part registers its closure; a call with no part behind it says so honestly.
struct DaemonHooks: Sendable {
    var rescan: @Sendable () async -> ControlResponse = {
        .error(503, "unavailable", "scanning is not available in this build")
    }
    var retry: @Sendable () async -> ControlResponse = {
        .error(503, "unavailable", "retry is not available in this build")
    }
    var queue: @Sendable (ControlRequest) async -> ControlResponse = { _ in
        .error(503, "unavailable", "the queue listing is not available in this build")
    }
    var logout: @Sendable () async -> ControlResponse = {
        .error(503, "unavailable", "sign-in is not available in this build")
    }
    var login: @Sendable (ControlRequest) async -> ControlResponse = { _ in
        .error(503, "unavailable", "sign-in is not available in this build")
    }
    var resume: @Sendable () async -> Void = {}
}

extension DaemonHooks {
    /// The sign-in calls, answered by the account service.
    static func login(_ account: AccountService) -> @Sendable (ControlRequest) async -> ControlResponse {
        { request in
            switch request.route {
            case .loginIdentityToken:
                guard let body = try? ControlJSON.decode(IdentityTokenLogin.self, from: request.body), !body.identityToken.isEmpty else {
                    return .error(400, "bad_request", "expected {\"identityToken\": ..., \"authorizationCode\": ...}")
                }
                let (userId, error) = await account.loginWithIdentityToken(body.identityToken, authorizationCode: body.authorizationCode)
                if let userId { return .json(LoginProgress(state: .signedIn, userId: userId)) }
                return .json(LoginProgress(state: .failed, message: error))
            case .loginDeviceStart:
                return .json(progress(await account.startPairing()))
            case .loginDevicePoll:
                return .json(progress(await account.pairingView()))
            case .loginDeviceCancel:
                await account.cancelPairing()
                return .json(progress(await account.pairingView()))
            default:
                return .error(404, "not_found", "not a sign-in call")
            }
        }
    }

    static func progress(_ v: AccountService.PairingView) -> LoginProgress {
        LoginProgress(state: LoginProgress.State(rawValue: v.outcome) ?? .failed, userCode: v.userCode,
                      verificationUri: v.verificationUri, verificationUriComplete: v.verificationUriComplete,
                      expiresAt: v.expiresAt.map(Timestamp.string), userId: v.userId, message: v.message)
    }

    static func logout(_ account: AccountService) -> @Sendable () async -> ControlResponse {
        {
            await account.logout()
            return .json(ControlReply(ok: true, message: "Signed out. The saved sign-in was erased and uploads stopped; run `photolalactl login` to sign in again."))
        }
    }
}

extension DaemonHooks {
    /// `photolalactl queue [--failed] [--limit N]`.
    static func queue(_ database: QueueDatabase, _ request: ControlRequest) -> ControlResponse {
        let limit = min(10_000, max(1, Int(request.query["limit"] ?? "") ?? 100))
        let failedOnly = request.query["failed"].map { $0 == "1" || $0 == "true" } ?? false
        do {
            let (items, total) = try database.listing(failedOnly: failedOnly, limit: limit)
            return .json(QueueListing(items: items.map {
                QueueListing.Item(path: $0.path, state: $0.state.publicName, size: $0.size, md5: $0.md5, attempts: $0.attempts,
                                  lastError: $0.lastError, updatedAt: Timestamp.string($0.updatedAt))
            }, total: total))
        } catch {
            return .error(500, "internal", "cannot read the queue: \(error)")
        }
    }
}
