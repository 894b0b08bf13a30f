import Credentials
import PhotolalaCore

/// Uploads run only when the user has not paused them and the account allows them
/// (signed in, Apple ID authorized, no subscription or quota pause).
struct DaemonGate: StageGate {
    let core: DaemonCore
    let account: AccountService

    func blockReason() async -> String? {
        if await core.isUserPaused { return "paused by the user" }
        switch await account.uploadBlock {
        case nil: return nil
        case .signedOut?: return "not signed in"
        case .paused(let reason)?: return reason.rawValue
        case .cancelled?: return "stopping"
        }
    }

    func changes() -> AsyncStream<Void> {
        core.changes()
    }
}
