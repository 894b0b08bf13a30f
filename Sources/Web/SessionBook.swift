import Foundation

/// The page's one-time links and sessions (web.md "Sessions"), as a value: a link works
/// once within `linkLifetime`, the session it opens lasts `ttl`, `revokeAll` ends every
/// one. Tokens come in from outside (tests pass fixed ones) and only their SHA-256 is
/// kept. Bounded: past `capacity` the oldest entry makes room.
package struct SessionBook: Codable, Sendable, Equatable {
    package static let linkLifetime: TimeInterval = 600
    package static let capacity = 64

    package struct Link: Codable, Sendable, Equatable {
        package var digest: String
        /// Who asked for it (`photolalactl web --link`'s uid): the session acts as them.
        package var uid: UInt32
        package var expiresAt: Date
    }

    package struct Session: Codable, Sendable, Equatable {
        package var digest: String
        package var uid: UInt32
        package var openedAt: Date
        package var expiresAt: Date
        /// Where the link was opened (the browser's address as the daemon saw it).
        package var openedFrom: String
    }

    package private(set) var links: [Link] = []
    package private(set) var sessions: [Session] = []

    package init() {}

    /// A new one-time link for `token`; returns when it stops working.
    package mutating func issueLink(token: String, uid: UInt32, now: Date) -> Date {
        prune(now: now)
        let expires = now.addingTimeInterval(Self.linkLifetime)
        links.append(Link(digest: WebToken.digest(token), uid: uid, expiresAt: expires))
        if links.count > Self.capacity { links.removeFirst(links.count - Self.capacity) }
        return expires
    }

    /// Uses up the link of `linkToken` and opens a session for `sessionToken`; nil when
    /// the link is unknown, used or expired.
    package mutating func redeem(linkToken: String, sessionToken: String, ttl: TimeInterval, remote: String, now: Date) -> Session? {
        let digest = WebToken.digest(linkToken)
        guard let i = links.firstIndex(where: { $0.digest == digest }) else { return nil }
        let link = links.remove(at: i)
        guard link.expiresAt > now else { return nil }
        prune(now: now)
        let session = Session(digest: WebToken.digest(sessionToken), uid: link.uid, openedAt: now,
                              expiresAt: now.addingTimeInterval(ttl), openedFrom: remote)
        sessions.append(session)
        if sessions.count > Self.capacity { sessions.removeFirst(sessions.count - Self.capacity) }
        return session
    }

    /// The live session of `token`, if any.
    package func session(token: String, now: Date) -> Session? {
        let digest = WebToken.digest(token)
        return sessions.first { $0.digest == digest && $0.expiresAt > now }
    }

    package mutating func revokeAll() {
        links.removeAll()
        sessions.removeAll()
    }

    /// Drops what has expired; true when anything was.
    @discardableResult
    package mutating func prune(now: Date) -> Bool {
        let before = links.count + sessions.count
        links.removeAll { $0.expiresAt <= now }
        sessions.removeAll { $0.expiresAt <= now }
        return links.count + sessions.count != before
    }

    package func liveSessions(now: Date) -> Int { sessions.count { $0.expiresAt > now } }
}
