import Account

/// What the catalog stage needs from the rest of the daemon before it may write to the
/// bucket: whose catalog it is and credentials for it. The daemon answers from the
/// account and the user's pause, so this module does not depend on either.
package protocol CatalogAccess: Sendable {
    /// Credentials and the user id to publish as; nil when the daemon must not write now
    /// (not signed in, paused).
    func session() async -> CatalogSession?
    /// S3 refused these credentials: the next `session()` should bring new ones.
    func rejected(_ grant: STSGrant) async
    /// Yields when `session()` may answer differently.
    func changes() -> AsyncStream<Void>
}
