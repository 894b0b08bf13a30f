import Control
import PhotolalaCore
import Queue

/// What the page asks of the daemon: the status, whether it changed, the queue database
/// for the chart, and the commands a session may run — answered by the same handler as
/// the control socket's, so a change from the page is the change `photolalactl` makes.
package protocol WebBackend: Sendable {
    func status() async -> DaemonStatus
    /// Moves whenever a part says something it shows changed (cheap to read).
    var statusGeneration: Int { get }
    var database: QueueDatabase { get }
    /// The watched folders as configured now.
    func watchedFolders() async -> [String]
    /// Runs a control call as `peer` (the uid that made the session's link).
    func perform(_ route: ControlRoute, body: [UInt8], as peer: PeerCredentials) async -> ControlResponse
}
