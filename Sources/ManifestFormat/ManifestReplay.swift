import PhotolalaCore

/// Replays a manifest up to a moment: which file stood at which path with which bytes.
/// Entries are applied in the order the chain gives them (snapshot parts, then log
/// segments by number); for each file the last entry recorded at or before `asOf` wins,
/// so a file that went away later is still there, and one that appeared later is not.
package struct ManifestReplay: Sendable {
    /// A file present at `asOf`.
    package struct File: Sendable, Equatable {
        package var folder: String
        package var path: [UInt8]
        package var version: FileVersion
        /// When this version was recorded.
        package var time: Int64
        /// Its owner, group and mode, when recorded (format 2).
        package var owner: Ownership?

        package init(folder: String, path: [UInt8], version: FileVersion, time: Int64, owner: Ownership? = nil) {
            self.folder = folder
            self.path = path
            self.version = version
            self.time = time
            self.owner = owner
        }
    }

    struct Key: Hashable {
        var folder: Int
        var path: [UInt8]
    }

    /// Milliseconds since the epoch; nil replays everything.
    package let asOf: Int64?
    private var folders = ExactKeyed<Int>()
    private var folderNames: [String] = []
    private var latest: [Key: (version: FileVersion?, time: Int64, owner: Ownership?)] = [:]
    /// Each folder's last record (format 2): its owner, group and mode.
    private var folderRecords: [Key: Ownership] = [:]
    /// Entries seen, whether or not they were before `asOf`.
    package private(set) var entriesRead = 0
    /// The newest time of any entry applied (what the replay reflects).
    package private(set) var newestApplied: Int64?

    package init(asOf: Int64?) {
        self.asOf = asOf
    }

    package mutating func apply(_ entries: [ManifestEntry]) {
        for e in entries { apply(e) }
    }

    package mutating func apply(_ e: ManifestEntry) {
        entriesRead += 1
        if let asOf, e.time > asOf { return }
        let folder: Int
        if let known = folders[e.folder] {
            folder = known
        } else {
            folder = folderNames.count
            folders[e.folder] = folder
            folderNames.append(e.folder)
        }
        if e.kind == .folder {
            if let owner = e.owner { folderRecords[Key(folder: folder, path: e.path)] = owner }
        } else {
            latest[Key(folder: folder, path: e.path)] = (e.kind == .gone ? nil : e.version, e.time, e.owner)
        }
        newestApplied = max(newestApplied ?? e.time, e.time)
    }

    /// The files present, sorted by folder then path bytes (a stable order to restore in).
    package var files: [File] {
        var out: [File] = []
        out.reserveCapacity(latest.count)
        for (key, value) in latest {
            if let v = value.version {
                out.append(File(folder: folderNames[key.folder], path: key.path, version: v, time: value.time, owner: value.owner))
            }
        }
        return out.sorted { a, b in
            a.folder.utf8.elementsEqual(b.folder.utf8) ? a.path.lexicographicallyPrecedes(b.path) : a.folder.utf8.lexicographicallyPrecedes(b.folder.utf8)
        }
    }

    /// Every folder the replayed entries name, in the order first seen.
    package var folderList: [String] { folderNames }

    /// The recorded owner of each folder, by watched folder then by the path below it
    /// (empty: the watched folder itself), as `RestorePlan.plan` takes them.
    package var folderOwners: [String: [[UInt8]: Ownership]] {
        var out: [String: [[UInt8]: Ownership]] = [:]
        for (key, owner) in folderRecords { out[folderNames[key.folder], default: [:]][key.path] = owner }
        return out
    }
}
