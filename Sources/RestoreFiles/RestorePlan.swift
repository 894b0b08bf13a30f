import Foundation
import ManifestFormat
import PhotolalaCore

/// One file to bring back: where it was on the device, what it held, where it goes.
package struct RestoreItem: Sendable, Equatable {
    package var folder: String
    package var path: [UInt8]
    package var version: FileVersion
    /// The folder the restore writes below: `--to DIR` as given, or (in place) one of this
    /// NAS's own watched folders. Opened as the user named it; nothing below it is ever
    /// reached through a symbolic link.
    package var root: String
    /// The path below `root`, every part a safe name: under `--to`, the folder's own
    /// component first (`photos/2024/a.jpg`); in place, the path on the device.
    package var destination: [UInt8]
    /// The file's recorded owner, group and mode (manifest format 2); nil: the restoring
    /// user's, 0666 less the umask.
    package var owner: Ownership?

    package init(folder: String, path: [UInt8], version: FileVersion, root: String, destination: [UInt8], owner: Ownership? = nil) {
        self.folder = folder
        self.path = path
        self.version = version
        self.root = root
        self.destination = destination
        self.owner = owner
    }

    /// The whole destination path, for messages: bytes that are not UTF-8 shown as �,
    /// control characters escaped (a forged manifest does not get to drive the terminal).
    package var displayPath: String {
        RestorePlan.shown((root == "/" ? "" : root) + "/" + String(decoding: destination, as: UTF8.self))
    }

    /// The file's path on the device it was backed up from.
    package var sourcePath: [UInt8] {
        Array((folder == "/" ? "" : folder).utf8) + [UInt8(ascii: "/")] + path
    }
}

/// Which files a restore brings back and where they go (cli.md, privacy.md "A restore
/// that trusts nothing"): the files present at `--as-of`, limited to the PATHs given.
/// With `--to DIR` each of the device's folders becomes one safe name under DIR; without
/// it, a folder is restored in place only if it is one of this NAS's own watched folders.
/// Whatever the manifest says, nothing is planned outside those roots.
package enum RestorePlan {
    package enum Problem: Error, Equatable, CustomStringConvertible {
        case relativeFilter(String)
        package var description: String {
            switch self {
            case .relativeFilter(let p): "\(p): give files and folders as they were named on that device, from the root (e.g. /srv/photos/2019)"
            }
        }
    }

    /// Files the plan will not restore, and why: a whole folder, or one path.
    package struct Refusal: Sendable, Equatable {
        /// The folder (or the file's path on the device), for messages.
        package var subject: String
        package var files: Int
        package var reason: String
        package init(subject: String, files: Int, reason: String) {
            self.subject = subject
            self.files = files
            self.reason = reason
        }
    }

    package struct Plan: Sendable, Equatable {
        package var items: [RestoreItem]
        package var refused: [Refusal]
        /// The recorded owner of each folder the restore may create, by root then by the
        /// folder's path below it (`RestoreWriter` applies them to the folders it creates).
        package var folderOwners: [String: [[UInt8]: Ownership]]
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

    /// The device's folders in a stable order: as its record lists them, then any other
    /// folder its manifest names, sorted. The same whatever PATHs are asked for, so the
    /// names under `--to` do not change from one run (or filter) to the next.
    package static func deviceFolders(record: [String], files: [ManifestReplay.File]) -> [String] {
        var seen = Set<[UInt8]>()
        var out: [String] = []
        for f in record where seen.insert(Array(f.utf8)).inserted { out.append(f) }
        var others = Set<[UInt8]>()
        for f in files where !seen.contains(Array(f.folder.utf8)) { others.insert(Array(f.folder.utf8)) }
        out += others.sorted { $0.lexicographicallyPrecedes($1) }.map { String(decoding: $0, as: UTF8.self) }
        return out
    }

    /// The one name each folder gets under `--to`: its last name if that is safe, else
    /// `folder-N` (N its 1-based position in `folders`); a name already taken gets `-2`,
    /// `-3`, … in the order given.
    package static func names(folders: [String]) -> [String: [UInt8]] {
        var used = Set<[UInt8]>()
        var out: [String: [UInt8]] = [:]
        for (i, folder) in folders.enumerated() where out[folder] == nil {
            let last = Array(folder.utf8).split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).last.map(Array.init) ?? []
            let name = isSafeName(last) ? last : Array("folder-\(i + 1)".utf8)
            var candidate = name
            var n = 2
            while used.contains(candidate) || !isSafeName(candidate) {
                candidate = name + Array("-\(n)".utf8)
                n += 1
            }
            used.insert(candidate)
            out[folder] = candidate
        }
        return out
    }

    /// Why `folder` may not be restored in place, or nil: it must be, byte for byte, one
    /// of this NAS's watched folders and an absolute, normalised path.
    package static func inPlaceRefusal(_ folder: String, watched: [String]) -> String? {
        let bytes = Array(folder.utf8)
        let parts = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst()
        let normalised = bytes.first == UInt8(ascii: "/") && (bytes == [UInt8(ascii: "/")] || parts.allSatisfy { isSafeName(Array($0)) })
        guard normalised else {
            return "\(shown(folder)) is not an absolute, normalised folder (an empty, '.' or '..' part): not restored in place; restore it elsewhere with --to DIR"
        }
        guard watched.contains(where: { Array($0.utf8) == bytes }) else {
            let these = watched.isEmpty ? "none" : watched.map(shown).joined(separator: ", ")
            return "\(shown(folder)) is not one of this NAS's watched folders (\(these)): not restored in place; restore it elsewhere with --to DIR"
        }
        return nil
    }

    /// Where each file goes, and what is refused. `deviceFolders` as `deviceFolders(record:files:)`
    /// gives them; `watched`: this NAS's watched folders (for a restore in place).
    package static func plan(_ files: [ManifestReplay.File], deviceFolders: [String], to: String?, watched: [String],
                             folderOwners: [String: [[UInt8]: Ownership]] = [:]) -> Plan {
        var roots: [String: (root: String, prefix: [UInt8])] = [:]
        var refusedFolders: [String: String] = [:]
        if let to {
            var base = to
            while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
            for (folder, name) in names(folders: Self.deviceFolders(record: deviceFolders, files: files)) {
                roots[folder] = (base, name)
            }
        } else {
            for folder in Set(files.map(\.folder)) {
                if let why = inPlaceRefusal(folder, watched: watched) { refusedFolders[folder] = why } else { roots[folder] = (folder, []) }
            }
        }
        var items: [RestoreItem] = []
        var refused: [Refusal] = []
        var refusedCount: [String: Int] = [:]
        for f in files {
            guard let target = roots[f.folder] else {
                refusedCount[f.folder, default: 0] += 1
                continue
            }
            let (root, prefix) = target
            guard isSafePath(f.path) else {
                let source = String(decoding: Array((f.folder == "/" ? "" : f.folder).utf8) + [UInt8(ascii: "/")] + f.path, as: UTF8.self)
                refused.append(Refusal(subject: shown(source), files: 1,
                                       reason: "\(shown(source)): the manifest names an unsafe path (an empty, '.' or '..' part, or a name too long): not restored"))
                continue
            }
            let destination = prefix.isEmpty ? f.path : prefix + [UInt8(ascii: "/")] + f.path
            items.append(RestoreItem(folder: f.folder, path: f.path, version: f.version, root: root, destination: destination, owner: f.owner))
        }
        refused = refusedCount.sorted { $0.key < $1.key }.map { folder, count in
            Refusal(subject: shown(folder), files: count,
                    reason: (refusedFolders[folder] ?? "not restored") + " (\(count) file\(count == 1 ? "" : "s"))")
        } + refused
        var owners: [String: [[UInt8]: Ownership]] = [:]
        for (folder, records) in folderOwners {
            guard let target = roots[folder] else { continue }
            let (root, prefix) = target
            for (path, owner) in records where path.isEmpty ? !prefix.isEmpty : isSafePath(path) {
                let destination = prefix.isEmpty ? path : path.isEmpty ? prefix : prefix + [UInt8(ascii: "/")] + path
                owners[root, default: [:]][destination] = owner
            }
        }
        return Plan(items: items, refused: refused, folderOwners: owners)
    }

    /// A name the writer may create: not empty, `.` or `..`, no NUL, at most 255 bytes.
    package static func isSafeName(_ c: [UInt8]) -> Bool {
        !c.isEmpty && c != [0x2e] && c != [0x2e, 0x2e] && !c.contains(0) && c.count <= 255 && !c.contains(UInt8(ascii: "/"))
    }

    package static func isSafePath(_ path: [UInt8]) -> Bool {
        path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).allSatisfy { isSafeName(Array($0)) }
    }

    /// Text from the manifest as a message may show it: control characters escaped.
    package static func shown(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || (0x80..<0xA0).contains($0.value) }) else { return text }
        var out = ""
        for s in text.unicodeScalars {
            if s.value < 0x20 || s.value == 0x7F || (0x80..<0xA0).contains(s.value) {
                out += "\\u{" + String(s.value, radix: 16) + "}"
            } else {
                out.unicodeScalars.append(s)
            }
        }
        return out
    }
}
