/// `photolalactl web --link` (web.md): the address that opens a session on the status
/// page, once, within `expiresAt`. The one command that exists to show this secret.
package struct WebLinkView: Codable, Sendable, Equatable {
    package var url: String
    package var expiresAt: String
    /// The page's own address, without the token.
    package var page: String

    package init(url: String, expiresAt: String, page: String) {
        self.url = url
        self.expiresAt = expiresAt
        self.page = page
    }
}
