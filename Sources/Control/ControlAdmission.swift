/// Who may hold what on the control socket, counted per uid: the kernel names every peer
/// (SO_PEERCRED), so a uid is what sshd's per-source limits count by address. The socket is
/// open to a whole group, and one member's runaway or hostile program must not crowd out
/// another member, nor root. Three things are capped for a uid that is not root or the
/// daemon's user:
///
/// - its connections (`maxConnectionsPerUser`), and all such connections together (the
///   slots not reserved for root and the daemon's user);
/// - its *startups*, connections that have not yet sent a whole request (`maxStartupsPerUser`,
///   sshd's `MaxStartups`): a slowloris holds these, and only these;
/// - its requests in flight, accepted and not yet answered (`maxRequestsPerUser`), and all
///   unprivileged requests together (`maxRequests`): each one costs the daemon work (a
///   status, a queue listing, a manifest), so a member asking in a loop gets at most that
///   share of it.
///
/// Root and the daemon's user are counted (they share the hard cap, `maxConnections`) but
/// never limited otherwise: what they ask is always taken. Pure: the server keeps one
/// behind a lock and asks it at each step; the tests walk it with plain numbers.
package struct ControlAdmission: Sendable, Equatable {
    package struct Limits: Sendable, Equatable {
        /// Connections at once, everyone together: what the daemon's descriptors can spare.
        package var maxConnections: Int
        /// Of `maxConnections`, slots only root and the daemon's user may take.
        package var reservedForPrivileged: Int
        package var maxConnectionsPerUser: Int
        package var maxStartupsPerUser: Int
        package var maxRequestsPerUser: Int
        package var maxRequests: Int

        package init(maxConnections: Int, reservedForPrivileged: Int, maxConnectionsPerUser: Int, maxStartupsPerUser: Int,
                     maxRequestsPerUser: Int, maxRequests: Int) {
            self.maxConnections = maxConnections
            self.reservedForPrivileged = reservedForPrivileged
            self.maxConnectionsPerUser = maxConnectionsPerUser
            self.maxStartupsPerUser = maxStartupsPerUser
            self.maxRequestsPerUser = maxRequestsPerUser
            self.maxRequests = maxRequests
        }
    }

    /// Why a connection or a request was not taken: the words the 503 carries.
    package enum Refusal: Sendable, Equatable {
        case tooManyConnections, tooManyStartups, tooManyRequests

        package var message: String {
            switch self {
            case .tooManyConnections: "too many connections; try again"
            case .tooManyStartups: "too many connections of yours are still sending their request; try again"
            case .tooManyRequests: "too many requests of yours are being answered; try again when they are"
            }
        }
    }

    /// Where a connection stands, for `closed`.
    package enum Stage: Sendable, Equatable {
        /// Connected, its request not yet whole.
        case startup
        /// Its request taken, its answer not yet taken by the client.
        case request
        /// Its request refused (or never taken): it holds only its connection.
        case idle
    }

    private struct Counts: Sendable, Equatable {
        var connections = 0
        var startups = 0
        var requests = 0
    }

    package let limits: Limits
    private var total = 0
    private var unprivilegedRequests = 0
    private var byUser: [UInt32: Counts] = [:]

    package init(limits: Limits) {
        self.limits = limits
    }

    /// A new connection from `uid`: nil when it is taken (as a startup), else why not.
    package mutating func connect(uid: UInt32, privileged: Bool) -> Refusal? {
        guard !privileged else {
            guard total < limits.maxConnections else { return .tooManyConnections }
            total += 1
            return nil
        }
        let mine = byUser[uid] ?? Counts()
        guard total < limits.maxConnections - limits.reservedForPrivileged, mine.connections < limits.maxConnectionsPerUser else {
            return .tooManyConnections
        }
        guard mine.startups < limits.maxStartupsPerUser else { return .tooManyStartups }
        total += 1
        byUser[uid, default: Counts()].connections += 1
        byUser[uid, default: Counts()].startups += 1
        return nil
    }

    /// The connection's request arrived whole: nil when it is taken (the handler answers
    /// it), else why not. Either way the connection is no longer a startup.
    package mutating func request(uid: UInt32, privileged: Bool) -> Refusal? {
        guard !privileged else { return nil }
        var mine = byUser[uid] ?? Counts()
        mine.startups = max(0, mine.startups - 1)
        defer { byUser[uid] = mine }
        guard mine.requests < limits.maxRequestsPerUser, unprivilegedRequests < limits.maxRequests else { return .tooManyRequests }
        mine.requests += 1
        unprivilegedRequests += 1
        return nil
    }

    /// The connection's request arrived whole but is not taken (refused by the access
    /// policy, a route that does not exist): it is no longer a startup and holds no request.
    package mutating func settle(uid: UInt32, privileged: Bool) {
        guard !privileged, var mine = byUser[uid] else { return }
        mine.startups = max(0, mine.startups - 1)
        byUser[uid] = mine
    }

    /// The connection closed, from the stage it had reached.
    package mutating func closed(uid: UInt32, privileged: Bool, stage: Stage) {
        total = max(0, total - 1)
        guard !privileged, var mine = byUser[uid] else { return }
        mine.connections -= 1
        switch stage {
        case .startup: mine.startups -= 1
        case .request:
            mine.requests -= 1
            unprivilegedRequests = max(0, unprivilegedRequests - 1)
        case .idle: break
        }
        byUser[uid] = mine.connections > 0 ? mine : nil
    }

    /// Connections open, everyone together.
    package var connections: Int { total }

    /// What `uid` holds now: connections, startups, requests.
    package func held(by uid: UInt32) -> (connections: Int, startups: Int, requests: Int) {
        let c = byUser[uid] ?? Counts()
        return (c.connections, c.startups, c.requests)
    }
}
