import Foundation
import PhotolalaCore

/// What scans found they could not back up, kept until a later scan of the same folder
/// finds it fixed: folders the daemon cannot read, and names that are not valid UTF-8.
/// Both must reach status: a log line alone is silent loss for whoever does not read the
/// journal. Keyed byte for byte (`ExactPath`).
package struct FolderProblems: Sendable {
    /// Invalid names by the scanned folder that found them (count, a few shown lossily).
    private(set) var invalidNames = ExactKeyed<InvalidNames>()
    /// Unreadable folders and why ("Permission denied" and "File name too long" need
    /// different fixes).
    private(set) var unreadable = ExactKeyed<String>()

    package struct Unreadable: Sendable, Equatable {
        var path: String
        var reason: String
    }

    struct InvalidNames: Sendable, Equatable {
        var count: Int
        var samples: [String]
    }

    /// A scan of `root` finished: its findings replace what earlier scans said of the
    /// folders it covered. Returns the problems not known before (worth a log line).
    mutating func scanned(_ root: String, recursive: Bool, invalidNameCount: Int, invalidNames samples: [String],
                          unreadable found: [Unreadable]) -> [Unreadable] {
        if recursive {
            for dir in invalidNames.keys where PathNames.isWithin(dir, root) { invalidNames.removeValue(forKey: dir) }
        }
        invalidNames[root] = invalidNameCount > 0 ? InvalidNames(count: invalidNameCount, samples: samples) : nil
        var fresh: [Unreadable] = []
        for problem in found {
            if unreadable[problem.path] == nil { fresh.append(problem) }
            unreadable[problem.path] = problem.reason
        }
        for path in unreadable.keys where PathNames.isWithin(path, root) {
            if !found.contains(where: { $0.path.utf8.elementsEqual(path.utf8) }) { unreadable.removeValue(forKey: path) }
        }
        return fresh
    }

    /// What to do about an unreadable folder. Beyond PATH_MAX no path names it (nothing
    /// the daemon does by path can reach it): permissions are not the advice then.
    package static func advice(for reason: String) -> String {
        reason == String(cString: strerror(ENAMETOOLONG))
            ? "its path is longer than the system allows (4096 bytes): move it closer to the top of the folder"
            : "the daemon's user needs read access (see photolalad(8), Permissions)"
    }

    /// The names `statusLines` shows, with the folders they are in: a member of the socket
    /// group who could not list a folder is not shown its names.
    var names: [StatusName] {
        let invalid = invalidNames.keys.flatMap { dir in (invalidNames[dir]?.samples ?? []).map { StatusName(text: $0, folder: dir) } }
        return unreadable.keys.map { StatusName(path: $0) } + invalid
    }

    /// The lines for `status`'s problems.
    package func statusLines() -> [String] {
        var lines: [String] = []
        let invalid = invalidNames.values.reduce(0) { $0 + $1.count }
        if invalid > 0 {
            let samples = invalidNames.values.flatMap(\.samples).sorted().prefix(3).map { "\"\($0)\"" }
            lines.append("\(invalid) file\(invalid == 1 ? "" : "s") or folder\(invalid == 1 ? " is" : "s are") not backed up: "
                + "the name\(invalid == 1 ? " is" : "s are") not valid UTF-8 (\(samples.joined(separator: ", "))\(invalid > 3 ? ", …" : "")); "
                + "rename \(invalid == 1 ? "it" : "them") (for example with convmv -f latin1 -t utf-8)")
        }
        if !unreadable.isEmpty {
            let names = unreadable.keys.sorted()
            let shown = names.prefix(5).map { "\($0) (\(unreadable[$0] ?? "?"))" }
            lines.append("\(names.count) folder\(names.count == 1 ? "" : "s") cannot be read by the daemon: \(shown.joined(separator: ", "))\(names.count > 5 ? ", …" : "")")
        }
        return lines
    }
}
