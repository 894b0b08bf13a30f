/// Path arithmetic on the bytes of absolute paths. It works on the UTF-8 view because '/'
/// is ASCII: no grapheme breaking, which a scan of a hundred thousand paths would pay for
/// on every one, and no Unicode equivalence (see `ExactPath`).
package enum PathNames {
    /// The folder holding `path` ("/" for a top-level entry, "" for a bare name).
    package static func parent(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "" }
        if slash == path.utf8.startIndex { return "/" }
        return String(Substring(path.utf8[..<slash]))
    }

    /// `path` is `dir` itself or below it, byte for byte (see `ExactPath`): the one
    /// "is this inside that folder" of the daemon. `String.hasPrefix(dir + "/")` is
    /// Unicode equivalence (an NFD twin would count as inside its NFC sibling) and wrong
    /// for "/".
    package static func isWithin(_ path: String, _ dir: String) -> Bool {
        path.utf8.elementsEqual(dir.utf8) || isInside(path, dir)
    }

    /// `path` with its leading `from` replaced by `to` when it is `from` or below it (a
    /// rename of `from`); nil when it is elsewhere.
    package static func renamed(_ path: String, from: String, to: String) -> String? {
        guard isWithin(path, from) else { return nil }
        if from == "/" { return to == "/" ? path : to + (path == "/" ? "" : path) }
        return to + String(Substring(path.utf8.dropFirst(from.utf8.count)))
    }

    /// `path` is strictly below `dir`.
    package static func isInside(_ path: String, _ dir: String) -> Bool {
        if dir == "/" { return path != "/" && path.utf8.first == UInt8(ascii: "/") }
        var path = path
        let n = dir.utf8.count
        return path.withUTF8 { $0.count > n && $0[n] == UInt8(ascii: "/") } && ExactPath.bytesStart(path, with: dir)
    }
}
