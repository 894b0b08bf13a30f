import Control
import Foundation
import PhotolalaCore
import Queue
import Synchronization
import Web

/// The status page's view of the daemon (web.md): the status the socket gives, and the
/// control socket's own handler for a session's changes, so the page does nothing the
/// commands do not.
struct DaemonWeb: WebBackend {
    let core: DaemonCore
    let handler: HandlerSlot

    var database: QueueDatabase { core.database }
    var statusGeneration: Int { core.changeGeneration }

    func status() async -> DaemonStatus { await core.status() }

    func watchedFolders() async -> [String] { await core.settings.watch.folders }

    func perform(_ route: ControlRoute, body: [UInt8], as peer: PeerCredentials) async -> ControlResponse {
        guard let handler = handler.value else { return .error(503, "starting", "photolalad is starting; try again in a moment") }
        return await handler.handle(ControlRequest(route: route, body: body, peer: peer))
    }
}

/// The control handler, made after the page's service (which it answers `web --link` with).
final class HandlerSlot: Sendable {
    private let slot = Mutex<DaemonControl?>(nil)
    var value: DaemonControl? { slot.withLock { $0 } }
    func set(_ handler: DaemonControl) { slot.withLock { $0 = handler } }
}

extension WebService: StatusContributor, Reconfigurable {
    package func contribute(to status: inout DaemonStatus) async {
        status.web = await self.status()
    }

    package func apply(_ settings: Settings) async { await apply(Options(settings)) }
}

/// How often an address the page cannot be served on is tried again: a minute (web.md);
/// `PHOTOLALAD_WEB_RETRY` ("2s") shortens it so an e2e test can wait it out.
enum WebRetry {
    static let variable = "PHOTOLALAD_WEB_RETRY"

    static func interval(_ environment: [String: String]) -> Duration {
        if let d = environment[variable].flatMap(Units.parseDuration), d > .zero { return d }
        return .seconds(60)
    }
}
