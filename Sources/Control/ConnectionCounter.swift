import Synchronization

/// The server's `ControlAdmission` behind a lock (connections are admitted on the event
/// loop, answered from the handler's tasks), and the bytes of answers not yet taken by
/// unprivileged clients.
package final class ConnectionCounter: Sendable {
    private struct State {
        var admission: ControlAdmission
        var pendingBytes = 0
    }
    private let state: Mutex<State>
    let limits: ControlServer.Limits

    package init(limits: ControlServer.Limits) {
        self.limits = limits
        state = Mutex(State(admission: ControlAdmission(limits: limits.admission)))
    }

    /// A new connection: nil when taken (as a startup), else why not.
    func connect(uid: UInt32, privileged: Bool) -> ControlAdmission.Refusal? {
        state.withLock { $0.admission.connect(uid: uid, privileged: privileged) }
    }

    /// Its request arrived whole and is to be answered: nil when taken, else why not.
    func request(uid: UInt32, privileged: Bool) -> ControlAdmission.Refusal? {
        state.withLock { $0.admission.request(uid: uid, privileged: privileged) }
    }

    /// Its request arrived whole and is refused before the handler sees it.
    func settle(uid: UInt32, privileged: Bool) {
        state.withLock { $0.admission.settle(uid: uid, privileged: privileged) }
    }

    func closed(uid: UInt32, privileged: Bool, stage: ControlAdmission.Stage) {
        state.withLock { $0.admission.closed(uid: uid, privileged: privileged, stage: stage) }
    }

    /// Root and the daemon's user may use every slot; anyone else the slots not reserved
    /// for them, and at most `maxConnectionsPerUser` of those.
    package func tryAcquire(uid: UInt32, privileged: Bool) -> Bool {
        connect(uid: uid, privileged: privileged) == nil
    }

    package func release(uid: UInt32, privileged: Bool) {
        closed(uid: uid, privileged: privileged, stage: .startup)
    }

    package func tryReserveResponse(_ bytes: Int) -> Bool {
        state.withLock { s in
            guard s.pendingBytes + bytes <= limits.maxPendingResponseBytes || s.pendingBytes == 0 else { return false }
            s.pendingBytes += bytes
            return true
        }
    }

    package func releaseResponse(_ bytes: Int) { state.withLock { $0.pendingBytes -= bytes } }
}
