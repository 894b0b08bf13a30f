import Testing
import Control

/// The per-uid counts of the control socket: one uid's connections, startups and requests
/// in flight are capped; root and the daemon's user are never refused below the hard cap.
@Suite struct ControlAdmissionTests {
    let limits = ControlAdmission.Limits(maxConnections: 20, reservedForPrivileged: 4, maxConnectionsPerUser: 6,
                                         maxStartupsPerUser: 3, maxRequestsPerUser: 2, maxRequests: 5)

    @Test func aUidHoldsAtMostItsStartups() {
        var a = ControlAdmission(limits: limits)
        for _ in 0..<3 { #expect(a.connect(uid: 1000, privileged: false) == nil) }
        #expect(a.connect(uid: 1000, privileged: false) == .tooManyStartups, "a slowloris holds only this many")
        #expect(a.connect(uid: 1001, privileged: false) == nil, "another member still gets in")
        // One of them sends its request: a startup is free again.
        #expect(a.request(uid: 1000, privileged: false) == nil)
        #expect(a.held(by: 1000) == (connections: 3, startups: 2, requests: 1))
        #expect(a.connect(uid: 1000, privileged: false) == nil)
    }

    @Test func aUidHasAtMostItsRequestsInFlight() {
        var a = ControlAdmission(limits: limits)
        for _ in 0..<3 { #expect(a.connect(uid: 1000, privileged: false) == nil) }
        #expect(a.request(uid: 1000, privileged: false) == nil)
        #expect(a.request(uid: 1000, privileged: false) == nil)
        #expect(a.request(uid: 1000, privileged: false) == .tooManyRequests)
        // The refused one is no startup any more, and holds no request.
        #expect(a.held(by: 1000) == (connections: 3, startups: 0, requests: 2))
        a.closed(uid: 1000, privileged: false, stage: .request)
        #expect(a.connect(uid: 1000, privileged: false) == nil)
        #expect(a.request(uid: 1000, privileged: false) == nil, "answered ones give their slot back")
    }

    @Test func requestsOfAllMembersTogetherAreCapped() {
        var a = ControlAdmission(limits: limits)
        var taken = 0
        for uid: UInt32 in [1, 2, 3] {
            for _ in 0..<2 {
                #expect(a.connect(uid: uid, privileged: false) == nil)
                if a.request(uid: uid, privileged: false) == nil { taken += 1 }
            }
        }
        #expect(taken == 5)
        #expect(a.connect(uid: 0, privileged: true) == nil)
        #expect(a.request(uid: 0, privileged: true) == nil, "root is answered whatever the members hold")
    }

    @Test func connectionsPerUidAndTheSlotsKeptForRoot() {
        var a = ControlAdmission(limits: limits)
        // Each member sends its request at once (no startups held): only connections count.
        func fill(_ uid: UInt32) -> Int {
            var n = 0
            while a.connect(uid: uid, privileged: false) == nil {
                a.settle(uid: uid, privileged: false)
                n += 1
            }
            return n
        }
        #expect(fill(1) == 6)
        #expect(a.connect(uid: 1, privileged: false) == .tooManyConnections)
        #expect(fill(2) == 6)
        #expect(fill(3) == 4, "20 - 4 reserved: the members' slots are gone")
        for _ in 0..<4 { #expect(a.connect(uid: 0, privileged: true) == nil) }
        #expect(a.connect(uid: 0, privileged: true) == .tooManyConnections, "the hard cap holds for root too")
        a.closed(uid: 2, privileged: false, stage: .idle)
        #expect(a.connect(uid: 0, privileged: true) == nil)
        #expect(a.connections == 20)
    }

    @Test func closingFromEachStageGivesEverythingBack() {
        var a = ControlAdmission(limits: limits)
        for _ in 0..<3 { _ = a.connect(uid: 7, privileged: false) }
        _ = a.request(uid: 7, privileged: false)
        a.settle(uid: 7, privileged: false)
        a.closed(uid: 7, privileged: false, stage: .request)
        a.closed(uid: 7, privileged: false, stage: .idle)
        a.closed(uid: 7, privileged: false, stage: .startup)
        #expect(a.held(by: 7) == (connections: 0, startups: 0, requests: 0))
        #expect(a.connections == 0)
        for _ in 0..<2 {
            _ = a.connect(uid: 8, privileged: false)
            #expect(a.request(uid: 8, privileged: false) == nil)
        }
        for _ in 0..<3 { _ = a.connect(uid: 9, privileged: false); _ = a.request(uid: 9, privileged: false) }
        #expect(a.held(by: 9).requests == 2)
    }
}
