import Control
import Foundation
import PhotolalaCore

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
