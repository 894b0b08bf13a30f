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

    /// - Parameters:
    ///   - inFlight: objects whose temporary files a transfer holds now.
    package func run(adopt: Bool, inFlight: Set<MD5Value>, now: @Sendable () -> Date, cancelled: @Sendable () -> Bool) throws -> Result {
        var result = Result()
        var missing: [UInt64: MirrorEntry] = [:]
        var after: MD5Value?
        while !cancelled() {
            let chunk = try database.mirrorEntries(in: [.copied, .adopted], after: after, limit: 1000)
            guard let last = chunk.last else { break }
            after = last.md5
            var saving: [MirrorEntry] = []
            for entry in chunk {
                result.checked += 1
                guard let path = entry.path else { continue }
                if let found = paths.identity(of: path) {
                    if found.inode == entry.inode && found.size == entry.size { continue }
                    // Another file at its path: the user's copy of the same bytes, or another photo.
                    if found.size == entry.size, let d = paths.digest(of: path, sha256: false), d.md5 == entry.md5 {
                        var e = entry
                        e.device = found.device
                        e.inode = found.inode
                        saving.append(e)
                        continue
                    }
                }
                if let inode = entry.inode { missing[inode] = entry } else {
                    var e = entry
                    e.state = .removed
                    saving.append(e)
                    result.removed += 1
                }
            }
            try database.applyMirror(saving: saving, forgetting: [], now: now())
        }
        guard !cancelled() else { return result }
        let sizes = adopt ? try database.mirrorAdoptableSizes() : []
        // Nothing to look for: no walk (a pass over an unchanged folder stats, never lists).
        if missing.isEmpty && sizes.isEmpty && !adopt { return result }
        result.walked = true
        let walk = MirrorWalk.walk(paths.root, wanted: { file in
            missing[file.inode] != nil || sizes.contains(file.size)
        }, cancelled: cancelled)
        result.problems = walk.problems
        for temporary in walk.temporaries {
            let name = temporary.split(separator: "/").last.map(String.init) ?? temporary
            guard let md5 = MD5Value(hex: String(name.dropFirst(MirrorNaming.temporaryPrefix.count).dropLast(4))),
                  !inFlight.contains(md5) else { continue }
            paths.removeTemporary(temporary)
            result.temporaries += 1
        }
        var saving: [MirrorEntry] = []
        for file in walk.files {
            if var entry = missing[file.inode], entry.size == file.size,
               (try? database.mirrorPathTaken(file.path, by: entry.md5)) == false {
                missing[file.inode] = nil
                entry.path = file.path
                entry.device = file.device
                saving.append(entry)
                result.moved += 1
                continue
            }
            guard sizes.contains(file.size), (try? database.mirrorPathTaken(file.path, by: MD5Value(high: 0, low: 0))) == false,
                  let d = paths.digest(of: file.path, sha256: false), d.size == file.size,
                  var entry = try database.mirrorEntry(d.md5), entry.size == file.size,
                  [.pending, .archived, .thawing, .refused, .removed].contains(entry.state) else { continue }
            entry.state = .adopted
            entry.path = file.path
            entry.device = d.device
            entry.inode = d.inode
            entry.attempts = 0
            entry.nextAttemptAt = nil
            entry.lastError = nil
            // One save each: two files with the same bytes are one adoption.
            try database.saveMirror(entry, now: now())
            result.adopted += 1
        }
        for (_, entry) in missing {
            var e = entry
            e.state = .removed
            saving.append(e)
            result.removed += 1
        }
        try database.applyMirror(saving: saving, forgetting: [], now: now())
        return result
    }
}
