#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging

/// The page's sessions, kept across restarts (docs/decisions.md): `state_dir/web-sessions.json`,
/// mode 0600, written (to a temporary name, then renamed) only when a link is made or
/// used or every session is revoked — never by reading, so an idle daemon writes nothing.
/// It holds digests, never a token: a copy of it opens nothing.
package actor WebSessions {
    private var book: SessionBook
    private let path: String?
    private let logger: Logger
    private var ttl: TimeInterval

    package static let fileName = "web-sessions.json"

    package init(stateDir: String?, ttl: Duration, logger: Logger) {
        self.path = stateDir.map { $0 + "/" + Self.fileName }
        self.logger = logger
        self.ttl = Double(ttl.components.seconds)
        self.book = SessionBook()
        if let path, let data = FileManager.default.contents(atPath: path) {
            if let saved = try? JSONDecoder().decode(SessionBook.self, from: data) {
                book = saved
            } else {
                logger.warning("the status page's sessions file \(path) cannot be read: every session is ended (run `photolalactl web --link` for a new one)")
            }
        }
    }

    package func setTTL(_ ttl: Duration) { self.ttl = Double(ttl.components.seconds) }

    /// A one-time link's token (for the command to print) and when it stops working.
    package func issueLink(uid: UInt32, now: Date = Date()) -> (token: String, expiresAt: Date) {
        let token = WebToken.random()
        let expires = book.issueLink(token: token, uid: uid, now: now)
        save()
        return (token, expires)
    }

    /// Opens a session with a one-time link: the new session's token (the cookie), or nil.
    package func redeem(linkToken: String, remote: String, now: Date = Date()) -> (token: String, session: SessionBook.Session)? {
        guard WebToken.wellFormed(linkToken) else { return nil }
        let token = WebToken.random()
        let before = book
        guard let session = book.redeem(linkToken: linkToken, sessionToken: token, ttl: ttl, remote: remote, now: now) else {
            // A used or expired link was dropped: remembered at the next write.
            if book != before && book.links.count != before.links.count { save() }
            return nil
        }
        save()
        return (token, session)
    }

    package func session(token: String?, now: Date = Date()) -> SessionBook.Session? {
        guard let token, WebToken.wellFormed(token) else { return nil }
        return book.session(token: token, now: now)
    }

    package func revokeAll() {
        book.revokeAll()
        save()
    }

    package func liveSessions(now: Date = Date()) -> Int { book.liveSessions(now: now) }

    private func save() {
        guard let path else { return }
        let temporary = path + ".tmp"
        do {
            let data = try JSONEncoder().encode(book)
            let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            defer { close(fd) }
            fchmod(fd, 0o600)
            let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written == data.count, fsync(fd) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            guard rename(temporary, path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        } catch {
            unlink(temporary)
            logger.error("cannot save the status page's sessions in \(path): \(error) (they last until the daemon stops)")
        }
    }
}
