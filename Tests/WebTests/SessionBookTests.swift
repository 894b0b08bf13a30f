import Foundation
import Logging
import Testing
import Web

/// web.md "Sessions": a link works once within 10 minutes; a session lasts its TTL;
/// revoking ends all; only digests are kept.
@Suite struct SessionBookTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let link = String(repeating: "a", count: 43)
    let cookie = String(repeating: "b", count: 43)

    @Test func aLinkOpensOneSessionOnce() {
        var book = SessionBook()
        let expires = book.issueLink(token: link, uid: 0, now: t0)
        #expect(expires == t0.addingTimeInterval(600))
        let session = book.redeem(linkToken: link, sessionToken: cookie, ttl: 3600, remote: "192.0.2.7", now: t0.addingTimeInterval(10))
        #expect(session?.uid == 0)
        #expect(session?.openedFrom == "192.0.2.7")
        #expect(book.session(token: cookie, now: t0.addingTimeInterval(20)) != nil)
        // Used once: a second opening (another browser, a replay from history) gets nothing.
        #expect(book.redeem(linkToken: link, sessionToken: String(repeating: "c", count: 43), ttl: 3600, remote: "x", now: t0.addingTimeInterval(30)) == nil)
    }

    @Test func anExpiredLinkOpensNothing() {
        var book = SessionBook()
        _ = book.issueLink(token: link, uid: 0, now: t0)
        #expect(book.redeem(linkToken: link, sessionToken: cookie, ttl: 3600, remote: "x", now: t0.addingTimeInterval(601)) == nil)
        #expect(book.links.isEmpty)
    }

    @Test func aSessionEndsAfterItsTTLAndOnRevoke() {
        var book = SessionBook()
        _ = book.issueLink(token: link, uid: 1000, now: t0)
        _ = book.redeem(linkToken: link, sessionToken: cookie, ttl: 3600, remote: "x", now: t0)
        #expect(book.session(token: cookie, now: t0.addingTimeInterval(3599)) != nil)
        #expect(book.session(token: cookie, now: t0.addingTimeInterval(3600)) == nil)
        var other = book
        other.revokeAll()
        #expect(other.session(token: cookie, now: t0) == nil)
        #expect(other.liveSessions(now: t0) == 0)
        #expect(book.liveSessions(now: t0) == 1)
    }

    @Test func onlyDigestsAreKept() throws {
        var book = SessionBook()
        _ = book.issueLink(token: link, uid: 0, now: t0)
        _ = book.issueLink(token: String(repeating: "d", count: 43), uid: 0, now: t0)
        _ = book.redeem(linkToken: link, sessionToken: cookie, ttl: 3600, remote: "x", now: t0)
        let saved = String(decoding: try JSONEncoder().encode(book), as: UTF8.self)
        #expect(!saved.contains(link) && !saved.contains(cookie) && !saved.contains(String(repeating: "d", count: 43)))
        #expect(saved.contains(WebToken.digest(cookie)))
    }

    @Test func theBookIsBounded() {
        var book = SessionBook()
        for i in 0..<(SessionBook.capacity + 10) {
            _ = book.issueLink(token: String(format: "%043d", i), uid: 0, now: t0)
        }
        #expect(book.links.count == SessionBook.capacity)
    }

    @Test func tokensAreRandomWellFormedAndTheCSRFTokenFollowsTheSession() {
        let a = WebToken.random(), b = WebToken.random()
        #expect(a != b)
        #expect(WebToken.wellFormed(a) && WebToken.wellFormed(b))
        #expect(!WebToken.wellFormed(a + "x") && !WebToken.wellFormed("../" + a.dropFirst(3)))
        #expect(WebToken.csrf(forSession: a) == WebToken.csrf(forSession: a))
        #expect(WebToken.csrf(forSession: a) != WebToken.csrf(forSession: b))
        #expect(WebToken.same(a, a) && !WebToken.same(a, b) && !WebToken.same(a, String(a.dropLast())))
    }

    @Test func sessionsSurviveARestartInTheirFile() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("web-sessions-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = WebSessions(stateDir: dir, ttl: .seconds(3600), logger: .init(label: "test"))
        let (link, _) = await first.issueLink(uid: 0)
        let opened = await first.redeem(linkToken: link, remote: "127.0.0.1")
        let token = try #require(opened?.token)
        let mode = try FileManager.default.attributesOfItem(atPath: dir + "/" + WebSessions.fileName)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let second = WebSessions(stateDir: dir, ttl: .seconds(3600), logger: .init(label: "test"))
        #expect(await second.session(token: token) != nil)
        await second.revokeAll()
        let third = WebSessions(stateDir: dir, ttl: .seconds(3600), logger: .init(label: "test"))
        #expect(await third.session(token: token) == nil)
    }
}
