/// What one sync found and did.
public struct SyncReport: Sendable, Equatable {
    /// The pointer as the sync left it; nil when the user has no catalog.
    public var pointer: SeenPointer?
    /// Our photos with a row in the catalog.
    public var rows: Int
    /// Rows in the catalog, from every device.
    public var total: Int
    public var added = 0
    /// Rows of ours an app removed together with the photo (not put back).
    public var withdrawn = 0
    /// Ready photos whose columns the apps could not read (not published).
    public var rejected = 0
    public var firstRejection: String?
    /// Where the time went, step by step.
    public var phases = ""

    public init(pointer: SeenPointer?, rows: Int, total: Int) {
        self.pointer = pointer
        self.rows = rows
        self.total = total
    }
}
