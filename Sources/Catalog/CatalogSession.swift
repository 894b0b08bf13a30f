import Backend

/// Whose catalog, and the credentials to write it with.
public struct CatalogSession: Sendable, Equatable {
    public var grant: STSGrant
    /// Verbatim, as the backend returns it (the apps spell it in uppercase).
    public var userId: String

    public init(grant: STSGrant, userId: String) {
        self.grant = grant
        self.userId = userId
    }
}
