/// Path arithmetic on the bytes of absolute paths. It works on the UTF-8 view because '/'
/// is ASCII: no grapheme breaking, which a scan of a hundred thousand paths would pay for
/// on every one, and no Unicode equivalence (see `ExactPath`).
public enum PathNames {
    /// The folder holding `path` ("/" for a top-level entry, "" for a bare name).
    public static func parent(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "" }
        if slash == path.utf8.startIndex { return "/" }
        return String(Substring(path.utf8[..<slash]))
    }

    /// `path` is strictly below `dir`.
    public static func isInside(_ path: String, _ dir: String) -> Bool {
        if dir == "/" { return path != "/" && path.utf8.first == UInt8(ascii: "/") }
        return path.utf8.count > dir.utf8.count
            && path.utf8.starts(with: dir.utf8)
            && path.utf8[path.utf8.index(path.utf8.startIndex, offsetBy: dir.utf8.count)] == UInt8(ascii: "/")
    }
}
