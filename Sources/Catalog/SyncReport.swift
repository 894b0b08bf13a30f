/// What one sync found and did.
package struct SyncReport: Sendable, Equatable {
    /// The pointer as the sync left it; nil when the user has no catalog.
    package var pointer: SeenPointer?
    /// Our photos with a row in the catalog.
    package var rows: Int
    /// Rows in the catalog, from every device.
    package var total: Int
    package var added = 0
    /// Rows of ours an app removed together with the photo (not put back).
    package var withdrawn = 0
    /// Ready photos whose columns the apps could not read (not published).
    package var rejected = 0
    package var firstRejection: String?
    /// Where the time went, step by step.
    package var phases = ""

    package init(pointer: SeenPointer?, rows: Int, total: Int) {
        self.pointer = pointer
        self.rows = rows
        self.total = total
    }
}
