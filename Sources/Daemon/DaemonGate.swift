import Account
import PhotolalaCore

/// Uploads run only when the user has not paused them and the account allows them
/// (signed in, Apple ID authorized, no subscription or quota pause): the gate of the
/// uploader, the thumbnails and the catalog. The bandwidth timetable's `0` slots hold the
/// photos' uploads alone, in the uploader, which reads the `BandwidthFeed` (config.md).
struct DaemonGate: StageGate {
    let core: DaemonCore
    let account: AccountService

    func blockReason() async -> String? {
        if await core.isUserPaused { return "paused by the user" }
        return await AccountGate(account: account).blockReason()
    }

    func changes() -> AsyncStream<Void> {
        core.changes()
    }
}

/// The account alone (signed in, not paused by the account), whatever the user's pause:
/// the inventory keeps listing while the user pauses uploads.
struct AccountGate: StageGate {
    let account: AccountService

    func blockReason() async -> String? {
        switch await account.uploadBlock {
        case nil: nil
        case .signedOut?: "not signed in"
        case .paused(let reason)?: reason.rawValue
        case .cancelled?: "stopping"
        }
    }

    func changes() -> AsyncStream<Void> {
        account.statusChanges.changes()
    }
}

/// The user's own pause alone (`photolalactl pause`): the mirror tells it from the account's.
struct UserPauseGate: StageGate {
    let core: DaemonCore

    func blockReason() async -> String? {
        await core.isUserPaused ? "paused by the user" : nil
    }

    func changes() -> AsyncStream<Void> {
        core.changes()
    }
}
