import Foundation
import ManifestFormat
import PhotolalaCore
import Queue

/// What the folder holds, at a full pass (mirror.md "Known by MD5, not by name"): every
/// copy is looked at where it was put, without reading it (a stat); a copy missing there
/// is looked for by its inode in a walk of the folder (the user renamed or moved it
/// within the folder: it is still here, at its new path); one found nowhere was removed
/// here and is not fetched again. With `adopt` (the first time the mirror runs on this
/// folder, or after the state was lost), files whose size some object not yet here has
/// are read and adopted when their MD5 is that object's. The mirror's temporary files that
/// no transfer holds are removed: the only files the daemon ever deletes.
package struct MirrorSurvey: Sendable {
    let database: QueueDatabase
    let paths: MirrorPaths

    package init(database: QueueDatabase, root: String) {
        self.database = database
        self.paths = MirrorPaths(root: root)
    }

    package struct Result: Sendable, Equatable {
        package var checked = 0
        package var moved = 0
        package var removed = 0
        package var adopted = 0
        package var temporaries = 0
        package var walked = false
        package var problems: [String] = []
    }

    /// The rows are read and written through the queue database's own queues; the stats,
    /// the walk and the reading run on `Blocking`'s threads, a chunk of a thousand copies
    /// at a time, so the cooperative pool is never held by the folder.
    ///
    /// - Parameters:
    ///   - inFlight: objects whose temporary files a transfer holds now.
    package func run(adopt: Bool, inFlight: Set<MD5Value>, now: @escaping @Sendable () -> Date,
                     cancelled: @escaping @Sendable () -> Bool) async throws -> Result {
        var result = Result()
        var missing: [UInt64: MirrorEntry] = [:]
        var after: MD5Value?
        let paths = self.paths
        while !cancelled() {
            let chunk = try await database.mirrorEntries(in: [.copied, .adopted], after: after, limit: 1000)
            guard let last = chunk.last else { break }
            after = last.md5
            // What each copy's path holds now: unchanged (nil), the same bytes at a new inode, or missing.
            let looked: [(MirrorEntry, Look)] = await Blocking.run {
                chunk.compactMap { entry -> (MirrorEntry, Look)? in
                    guard let path = entry.path else { return nil }
                    if let found = paths.identity(of: path) {
                        if found.inode == entry.inode && found.size == entry.size { return nil }
                        // Another file at its path: the user's copy of the same bytes, or another photo.
                        if found.size == entry.size, let d = paths.digest(of: path, sha256: false), d.md5 == entry.md5 {
                            return (entry, .same(device: found.device, inode: found.inode))
                        }
                    }
                    return (entry, .missing)
                }
            }
            result.checked += chunk.count
            var saving: [MirrorEntry] = []
            for (entry, look) in looked {
                switch look {
                case let .same(device, inode):
                    var e = entry
                    e.device = device
                    e.inode = inode
                    saving.append(e)
                case .missing:
                    if let inode = entry.inode { missing[inode] = entry } else {
                        var e = entry
                        e.state = .removed
                        saving.append(e)
                        result.removed += 1
                    }
                }
            }
            try await database.applyMirror(saving: saving, forgetting: [], now: now())
        }
        guard !cancelled() else { return result }
        let sizes = adopt ? try await database.mirrorAdoptableSizes() : []
        // Nothing to look for: no walk (a pass over an unchanged folder stats, never lists).
        if missing.isEmpty && sizes.isEmpty && !adopt { return result }
        result.walked = true
        let missingInodes = Set(missing.keys)
        let walk = await Blocking.run {
            MirrorWalk.walk(paths.root, wanted: { file in
                missingInodes.contains(file.inode) || sizes.contains(file.size)
            }, cancelled: cancelled)
        }
        result.problems = walk.problems
        let temporaries = walk.temporaries.filter { temporary in
            let name = temporary.split(separator: "/").last.map(String.init) ?? temporary
            guard let md5 = MD5Value(hex: String(name.dropFirst(MirrorNaming.temporaryPrefix.count).dropLast(4))) else { return false }
            return !inFlight.contains(md5)
        }
        if !temporaries.isEmpty {
            await Blocking.run { for temporary in temporaries { paths.removeTemporary(temporary) } }
            result.temporaries += temporaries.count
        }
        var saving: [MirrorEntry] = []
        for file in walk.files {
            if var entry = missing[file.inode], entry.size == file.size,
               (try? await database.mirrorPathTaken(file.path, by: entry.md5)) == false {
                missing[file.inode] = nil
                entry.path = file.path
                entry.device = file.device
                saving.append(entry)
                result.moved += 1
                continue
            }
            guard sizes.contains(file.size), (try? await database.mirrorPathTaken(file.path, by: MD5Value(high: 0, low: 0))) == false
            else { continue }
            let path = file.path
            guard let d = await Blocking.run({ paths.digest(of: path, sha256: false) }), d.size == file.size,
                  var entry = try await database.mirrorEntry(d.md5), entry.size == file.size,
                  QueueDatabase.notHere.contains(entry.state) else { continue }
            entry.state = .adopted
            entry.path = file.path
            entry.device = d.device
            entry.inode = d.inode
            entry.attempts = 0
            entry.nextAttemptAt = nil
            entry.lastError = nil
            // One save each: two files with the same bytes are one adoption.
            try await database.saveMirror(entry, now: now())
            result.adopted += 1
        }
        for (_, entry) in missing {
            var e = entry
            e.state = .removed
            saving.append(e)
            result.removed += 1
        }
        try await database.applyMirror(saving: saving, forgetting: [], now: now())
        return result
    }

    /// What a copy's path holds at a survey, when it is not the copy as it was recorded.
    private enum Look: Sendable {
        case same(device: UInt64, inode: UInt64)
        case missing
    }
}
