import Testing
import Control

@Suite struct AccessPolicyTests {
    let policy = AccessPolicy(daemonUID: 998, readerGroup: 997, readerGroupName: "photolala")

    @Test func rootAndDaemonUserMayDoEverything() {
        for uid: UInt32 in [0, 998] {
            let peer = PeerCredentials(pid: 0, uid: uid, gid: 12345)
            #expect(policy.allows(.read, peer: peer))
            #expect(policy.allows(.write, peer: peer))
        }
    }

    @Test func groupMembersMayOnlyRead() {
        let member = PeerCredentials(pid: 0, uid: 1000, gid: 997)
        #expect(policy.allows(.read, peer: member))
        #expect(!policy.allows(.write, peer: member))
    }

    @Test func theTrailIsForRootAndTheDaemonUserOnly() {
        #expect(!policy.allows(.trail, peer: PeerCredentials(pid: 0, uid: 1000, gid: 997)))
        #expect(policy.allows(.trail, peer: PeerCredentials(pid: 0, uid: 998, gid: 998)))
        #expect(policy.allows(.trail, peer: PeerCredentials(pid: 0, uid: 0, gid: 0)))
        #expect(policy.refusal(.trail).contains("root and the daemon's user"))
    }

    @Test func theVerificationKeyIsRootsAlone() {
        #expect(policy.allows(.root, peer: PeerCredentials(pid: 0, uid: 0, gid: 0)))
        #expect(!policy.allows(.root, peer: PeerCredentials(pid: 0, uid: 998, gid: 998)), "not the daemon's user, whose files it checks")
        #expect(!policy.allows(.root, peer: PeerCredentials(pid: 0, uid: 1000, gid: 997)))
        #expect(policy.refusal(.root).contains("root only"))
    }

    @Test func othersMayNotRead() {
        let other = PeerCredentials(pid: 0, uid: 1000, gid: 1000)
        #expect(!policy.allows(.read, peer: other))
        #expect(policy.refusal(.read).contains("photolala"))
    }

    @Test func withoutTheGroupOnlyRootAndDaemon() {
        let p = AccessPolicy(daemonUID: 998, readerGroup: nil, readerGroupName: "photolala")
        #expect(!p.allows(.read, peer: PeerCredentials(pid: 0, uid: 1000, gid: 997)))
        #expect(p.allows(.read, peer: PeerCredentials(pid: 0, uid: 0, gid: 0)))
    }

    @Test func routesAreVersionedAndClassified() {
        #expect(ControlRoute(method: "GET", path: "/v1/status") == .status)
        #expect(ControlRoute(method: "POST", path: "/v1/status") == nil)
        // Reads: status, queue, metrics, files, the progress of a verify, and what `restore
        // --dry-run` needs. Everything else changes something: verify puts objects back in the
        // queue; restoring itself (a session, the bytes, asking archived objects back) is a write.
        let reads: Set<ControlRoute> = [.status, .queue, .metrics, .files, .verifyProgress,
                                        .devices, .manifest, .restoreObjects, .restoreListing, .restoreExport, .mirror]
        // The audit trail tells who did what: root and the daemon's user only.
        let trails: Set<ControlRoute> = [.audit, .auditVerify, .auditSealed]
        // The trail's verification key: root alone.
        let rootOnly: Set<ControlRoute> = [.auditVerificationKey, .auditVerificationKeyTaken]
        for route in ControlRoute.allCases {
            #expect(route.access == (reads.contains(route) ? .read : trails.contains(route) ? .trail : rootOnly.contains(route) ? .root : .write),
                    "\(route)")
        }
        #expect(ControlRoute(method: "POST", path: "/v1/verify") == .verify && ControlRoute.verify.access == .write)
        for route in ControlRoute.allCases { #expect(route.path.hasPrefix("/v1/")) }
    }

    @Test func queryStringsAreSplit() {
        let (path, query) = RequestHandler.split("/v1/queue?limit=5&failed=1&x=a%20b")
        #expect(path == "/v1/queue")
        #expect(query == ["limit": "5", "failed": "1", "x": "a b"])
    }

    @Test func clientParsesAnswers() throws {
        let (status, body) = try ControlClient.parse(Array("HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\n{}".utf8))
        #expect(status == 403)
        #expect(body == Array("{}".utf8))
    }
}
