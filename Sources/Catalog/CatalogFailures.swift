#if canImport(Glibc)
import Glibc
#endif

/// A local file of the catalog's scratch space could not be used.
struct CatalogFileError: Error, CustomStringConvertible {
    var path: String
    var action: String
    var errno: Int32

    var description: String {
        "cannot \(action) \(path): \(String(cString: strerror(errno)))"
            + (errno == ENOSPC ? " — free space on that disk; the catalog is published once there is room" : "")
    }
}

/// The catalog in the bucket cannot be read as a catalog: nothing is published over it.
struct CatalogUnreadable: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
