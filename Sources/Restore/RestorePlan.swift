import Foundation
import ManifestFormat
import PhotolalaCore

/// One file to bring back: where it was on the device, what it held, where it goes.
package struct RestoreItem: Sendable, Equatable {
    package var folder: String
    package var path: [UInt8]
    package var version: FileVersion
    /// The folder it goes into (absolute, or relative to the working directory as `--to`
    /// was given) and the path below it: the created part, walked without following links.
    package var root: String
    package var destination: [UInt8]

    package init(folder: String, path: [UInt8], version: FileVersion, root: String, destination: [UInt8]) {
        self.folder = folder
        self.path = path
        self.version = version
        self.root = root
        self.destination = destination
    }

    /// The whole destination path, for messages (bytes that are not UTF-8 shown as �).
    package var displayPath: String {
        (root == "/" ? "" : root) + "/" + String(decoding: destination, as: UTF8.self)
    }

    /// The file's path on the device it was backed up from.
    package var sourcePath: [UInt8] {
        Array((folder == "/" ? "" : folder).utf8) + [UInt8(ascii: "/")] + path
    }
}

/// Which files a restore brings back and where they go (cli.md): the files present at
/// `--as-of`, limited to the PATHs given (files or folders, as named on that device),
/// each at its original path or, with `--to DIR`, under `DIR/<watched folder's last name>/`.
package enum RestorePlan {
    package enum Problem: Error, Equatable, CustomStringConvertible {
        case relativeFilter(String)
        package var description: String {
            switch self {
            case .relativeFilter(let p): "\(p): give files and folders as they were named on that device, from the root (e.g. /srv/photos/2019)"
            }
        }
    }

    /// The files under the filters (all when none); and the filters that matched nothing.
    package static func select(_ files: [ManifestReplay.File], filters: [String]) throws(Problem) -> (files: [ManifestReplay.File], unmatched: [String]) {
        guard !filters.isEmpty else { return (files, []) }
        var prefixes: [[UInt8]] = []
        for f in filters {
            guard f.hasPrefix("/") else { throw .relativeFilter(f) }
            var bytes = Array(f.utf8)
            while bytes.count > 1 && bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
            prefixes.append(bytes)
        }
        var matched = [Bool](repeating: false, count: prefixes.count)
        let selected = files.filter { file in
            let source = Array((file.folder == "/" ? "" : file.folder).utf8) + [UInt8(ascii: "/")] + file.path
            var any = false
            for (i, p) in prefixes.enumerated() where covers(p, source) {
                matched[i] = true
                any = true
            }
            return any
        }
        return (selected, zip(filters, matched).filter { !$0.1 }.map(\.0))
    }

    /// `prefix` is `path` itself or a folder holding it, byte for byte.
    static func covers(_ prefix: [UInt8], _ path: [UInt8]) -> Bool {
        if prefix == [UInt8(ascii: "/")] { return true }
        guard path.count >= prefix.count, path.starts(with: prefix) else { return false }
        return path.count == prefix.count || path[prefix.count] == UInt8(ascii: "/")
    }

    /// Where each watched folder goes: itself, or `DIR/<its last name>` with `--to DIR`
    /// (`-2`, `-3`, … after the name when two folders share it, in the order given).
    package static func roots(folders: [String], to: String?) -> [String: String] {
        guard let to else { return Dictionary(folders.map { ($0, $0) }, uniquingKeysWith: { a, _ in a }) }
        var base = to
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        var used = Set<String>()
        var out: [String: String] = [:]
        for folder in folders where out[folder] == nil {
            var name = (folder as NSString).lastPathComponent
            if name.isEmpty || name == "/" { name = "root" }
            var candidate = name
            var n = 2
            while used.contains(candidate) {
                candidate = "\(name)-\(n)"
                n += 1
            }
            used.insert(candidate)
            out[folder] = (base == "/" ? "" : base) + "/" + candidate
        }
        return out
    }

    package static func items(_ files: [ManifestReplay.File], to: String?) -> [RestoreItem] {
        var folders: [String] = []
        for f in files where !folders.contains(where: { $0.utf8.elementsEqual(f.folder.utf8) }) { folders.append(f.folder) }
        let roots = roots(folders: folders.sorted(), to: to)
        return files.map { f in
            RestoreItem(folder: f.folder, path: f.path, version: f.version, root: roots[f.folder] ?? f.folder, destination: f.path)
        }
    }
}
