/// The catalog in the bucket cannot be read as a catalog: nothing is published over it.
struct CatalogUnreadable: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
