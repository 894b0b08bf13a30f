import Credentials
import PhotolalaCore
import Upload

/// Uploads run only when the user has not paused them and the account allows them
/// (signed in, Apple ID authorized, no subscription or quota pause), and, for the photos'
/// uploads, when the bandwidth timetable is not in a `0` slot.
struct DaemonGate: UploadGate {
    let core: DaemonCore
    let account: AccountService
    /// The timetable pauses the photos' uploads only: thumbnails and the catalog go on (config.md).
    var schedule: BandwidthFeed? = nil

    func blockReason() async -> String? {
        if await core.isUserPaused { return "paused by the user" }
        if let current = schedule?.current, current.scheduled && current.isPaused { return "paused by the bandwidth timetable" }
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
