import PhotolalaCore

/// A path given to `photolalactl files`, in the queue's terms: the queue stores paths as
/// found under each watched folder, so a path reached through a symlink (or a folder
/// configured through one) is mapped back by its real path. Pure apart from `realPath`.
package enum WatchedPath {
    /// The path as the queue would hold it, or nil when it is under no watched folder.
    package static func resolve(_ path: String, folders: [String], realPath: (String) -> String?) -> String? {
        var path = path
        while path.utf8.count > 1 && path.utf8.last == UInt8(ascii: "/") { path.removeLast() }
        guard path.utf8.first == UInt8(ascii: "/") else { return nil }
        if folders.contains(where: { PathNames.isWithin(path, $0) }) { return path }
        guard let real = realPath(path) else { return nil }
        for folder in folders {
            if let realFolder = realPath(folder), let mapped = PathNames.renamed(real, from: realFolder, to: folder) {
                return mapped
            }
        }
        return nil
    }
}
