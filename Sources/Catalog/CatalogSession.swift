import Account

/// Whose catalog, and the credentials to write it with.
package struct CatalogSession: Sendable, Equatable {
    package var grant: STSGrant
    /// Verbatim, as the backend returns it (the apps spell it in uppercase).
    package var userId: String

    package init(grant: STSGrant, userId: String) {
        self.grant = grant
        self.userId = userId
    }
}
