#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore

/// Decides, from names alone, what the watcher and the scanner look at.
///
/// Paths are `String`s throughout the daemon: the queue keeps them in SQLite TEXT, they
/// become S3 keys and appear in JSON status, all of which must be valid UTF-8. On Linux a
/// name is any byte string, so a name that is not valid UTF-8 cannot be named faithfully
/// downstream; decoding it lossily would upload under a different name and never find the
/// file again. Such names are therefore skipped at the boundary where bytes become
/// `String` (`PathFilter.name(fromCString:)`), with a logged warning naming the directory
/// and a lossy rendering of the name so the user can rename it. A skipped directory name
/// skips its subtree. Nothing traps on odd bytes.
///
/// Swift compares `String`s by canonical equivalence: two names that differ only in
/// Unicode normalization (NFC vs NFD from a Mac client) are one key in a dictionary. Both
/// files still reach the scanner; the watcher's directory table keeps the first.
package struct PathFilter: Sendable, Equatable {
    /// Extensions accepted for files (lower-case, no dot); empty accepts every extension.
    package let extensions: Set<String>
    /// User globs, matched with fnmatch(3) against single names.
    package let exclude: [String]

    /// Built-in names skipped at any depth (config.md), compared ignoring ASCII case
    /// because most arrive from Windows and macOS clients over SMB, whose spelling varies
    /// (`$Recycle.Bin`, `Desktop.ini`).
    package static let builtInNames: Set<String> = Set([
        "@eaDir", "@__thumb", "#recycle", "#snapshot", "@Recycle", "@Recently-Snapshot",
        "$RECYCLE.BIN", "lost+found", ".SynologyWorkingDirectory", "Thumbs.db", "desktop.ini",
    ].map { $0.lowercased() })
    /// Synology's thumbnail files.
    package static let builtInPrefixes = ["SYNOFILE_THUMB_"]
    /// Partial files of browsers, rsync-likes and editors (files only: a directory named
    /// `x.tmp` may hold finished photos).
    package static let partialSuffixes = [".part", ".partial", ".tmp", ".crdownload", ".download", "~"]

    private static let longestBuiltInName = builtInNames.map(\.utf8.count).max() ?? 0

    package init(extensions: Set<String>, exclude: [String]) {
        self.extensions = Set(extensions.map { $0.lowercased() })
        self.exclude = exclude
    }

    package init(options: WatcherOptions) {
        self.init(extensions: options.extensions, exclude: options.exclude)
    }

    /// Skipped whatever it is: hidden, a built-in name, or a user glob.
    package func isExcluded(name: String) -> Bool {
        Self.isBuiltInExcluded(name: name) || matchesUserGlob(name)
    }

    /// A directory worth descending into.
    package func accepts(directoryName name: String) -> Bool {
        !name.isEmpty && !isExcluded(name: name)
    }

    /// A file worth reading: not excluded, not partial, and with an accepted extension.
    package func accepts(fileName name: String) -> Bool {
        // The extension test comes first: it is cheap and rejects most non-photos.
        guard !name.isEmpty, hasAcceptedExtension(name) else { return false }
        guard !Self.isBuiltInExcluded(name: name), !Self.isPartial(name: name) else { return false }
        return !matchesUserGlob(name)
    }

    /// Checks every component of `path` below `root` (for paths that come from elsewhere,
    /// e.g. queue entries after the filter changed on reload).
    package func accepts(filePath path: String, under root: String) -> Bool {
        let root = normalizedPath(root)
        guard PathNames.isInside(path, root) else { return false }
        let relative = Substring(path.utf8.dropFirst(root == "/" ? 1 : root.utf8.count + 1))
        let parts = relative.split(separator: "/", omittingEmptySubsequences: false)
        guard let file = parts.last else { return false }
        for dir in parts.dropLast() where !accepts(directoryName: String(dir)) { return false }
        return accepts(fileName: String(file))
    }

    package static func isBuiltInExcluded(name: String) -> Bool {
        let utf8 = name.utf8
        if utf8.first == UInt8(ascii: ".") { return true }
        if utf8.count <= longestBuiltInName, builtInNames.contains(name.lowercased()) { return true }
        for prefix in builtInPrefixes where name.hasPrefix(prefix) { return true }
        return false
    }

    package static func isPartial(name: String) -> Bool {
        partialSuffixes.contains { hasSuffixIgnoringASCIICase(name, $0) }
    }

    func hasAcceptedExtension(_ name: String) -> Bool {
        if extensions.isEmpty { return true }
        let utf8 = name.utf8
        guard let dot = utf8.lastIndex(of: UInt8(ascii: ".")), dot != utf8.startIndex else { return false }
        let ext = Substring(utf8[utf8.index(after: dot)...])
        if ext.isEmpty { return false }
        if ext.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) || !ext.utf8.allSatisfy({ $0 < 0x80 }) {
            return extensions.contains(ext.lowercased())
        }
        return extensions.contains(String(ext))
    }

    func matchesUserGlob(_ name: String) -> Bool {
        guard !exclude.isEmpty else { return false }
        return name.withCString { cName in
            exclude.contains { fnmatch($0, cName, 0) == 0 }
        }
    }

    private static func hasSuffixIgnoringASCIICase(_ name: String, _ suffix: String) -> Bool {
        let n = name.utf8, s = suffix.utf8
        guard n.count >= s.count else { return false }
        return zip(n.suffix(s.count), s).allSatisfy { asciiLower($0) == asciiLower($1) }
    }

    private static func asciiLower(_ b: UInt8) -> UInt8 {
        b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z") ? b + 32 : b
    }

    /// The one place where a name's bytes become a `String`: nil when they are not valid
    /// UTF-8 (the caller logs and skips).
    package static func name(fromCString cName: UnsafePointer<CChar>) -> String? {
        String(validatingCString: cName)
    }

    /// A readable rendering of bytes that are not valid UTF-8, for log lines only.
    package static func lossyName(fromCString cName: UnsafePointer<CChar>) -> String {
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(cName).assumingMemoryBound(to: UInt8.self), count: strlen(cName))
        return String(decoding: bytes, as: UTF8.self)
    }
}
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
