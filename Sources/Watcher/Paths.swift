/// `dir/name`, without doubling the slash of the root.
func join(_ dir: String, _ name: String) -> String {
    dir == "/" ? "/" + name : dir + "/" + name
}

/// Without trailing slashes, except for the root itself.
func normalizedPath(_ path: String) -> String {
    var path = path
    while path.utf8.count > 1 && path.hasSuffix("/") { path.removeLast() }
    return path
}
