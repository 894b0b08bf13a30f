import Synchronization

/// Counts live connections, in total and per uid, so that a flood can exhaust neither the
/// daemon's descriptors nor the slots of other users; and the bytes of answers not yet
/// taken by unprivileged clients.
final class ConnectionCounter: Sendable {
    private struct State {
        var total = 0
        var byUser: [UInt32: Int] = [:]
        var pendingBytes = 0
    }
    private let state = Mutex(State())
    let limits: ControlServer.Limits

    init(limits: ControlServer.Limits) {
        self.limits = limits
    }

    /// Root and the daemon's user may use every slot; anyone else the slots not reserved
    /// for them, and at most `maxConnectionsPerUser` of those.
    func tryAcquire(uid: UInt32, privileged: Bool) -> Bool {
        state.withLock { s in
            if privileged {
                guard s.total < limits.maxConnections else { return false }
            } else {
                guard s.total < limits.maxConnections - limits.reservedForPrivileged,
                      s.byUser[uid, default: 0] < limits.maxConnectionsPerUser else { return false }
                s.byUser[uid, default: 0] += 1
            }
            s.total += 1
            return true
        }
    }

    func release(uid: UInt32, privileged: Bool) {
        state.withLock { s in
            s.total -= 1
            if !privileged {
                let left = s.byUser[uid, default: 1] - 1
                s.byUser[uid] = left > 0 ? left : nil
            }
        }
    }

    func tryReserveResponse(_ bytes: Int) -> Bool {
        state.withLock { s in
            guard s.pendingBytes + bytes <= limits.maxPendingResponseBytes || s.pendingBytes == 0 else { return false }
            s.pendingBytes += bytes
            return true
        }
    }

    func releaseResponse(_ bytes: Int) { state.withLock { $0.pendingBytes -= bytes } }
}
