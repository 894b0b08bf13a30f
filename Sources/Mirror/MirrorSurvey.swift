import Foundation
import Logging
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
        var candidates: [MirrorWalk.File] = []
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
            if sizes.contains(file.size) { candidates.append(file) }
        }
        result.adopted = try await adoptFiles(candidates, now: now, cancelled: cancelled)
        for (_, entry) in missing {
            var e = entry
            e.state = .removed
            saving.append(e)
            result.removed += 1
        }
        try await database.applyMirror(saving: saving, forgetting: [], now: now())
        return result
    }

    /// Reads the files whose size an object not yet here has and adopts those whose MD5 is
    /// that object's, a chunk at a time: one read of the paths already named, the chunk's
    /// digests on `Blocking`'s threads, one read of their objects, one write (before: four
    /// round trips and a transaction per file, 2.8 ms a file at 100,000 files). Two files
    /// with the same bytes are one adoption, the first in the walk's order.
    private func adoptFiles(_ files: [MirrorWalk.File], now: @escaping @Sendable () -> Date,
                       cancelled: @escaping @Sendable () -> Bool) async throws -> Int {
        let paths = self.paths
        var adopted: Set<MD5Value> = []
        for range in Self.adoptionChunks(files.map(\.size)) where !cancelled() {
            let chunk = Array(files[range])
            let taken = try await database.mirrorPathsTaken(chunk.map(\.path))
            let digests = await Blocking.run {
                chunk.map { file in taken.contains(file.path) ? nil : paths.digest(of: file.path, sha256: false) }
            }
            let entries = try await database.mirrorEntries(md5s: digests.compactMap { $0?.md5 })
            var saving: [MirrorEntry] = []
            for (file, d) in zip(chunk, digests) {
                guard let d, d.size == file.size, !adopted.contains(d.md5), var entry = entries[d.md5],
                      entry.size == file.size, QueueDatabase.notHere.contains(entry.state) else { continue }
                adopted.insert(d.md5)
                entry.state = .adopted
                entry.path = file.path
                entry.device = d.device
                entry.inode = d.inode
                entry.attempts = 0
                entry.nextAttemptAt = nil
                entry.lastError = nil
                saving.append(entry)
            }
            try await database.applyMirror(saving: saving, forgetting: [], now: now())
        }
        return adopted.count
    }

    /// Consecutive ranges of at most 256 files and, past the first file, 256 MB: a chunk
    /// is read in one `Blocking.run`, and a stop is looked at between chunks, so a folder
    /// of large videos must not make one minutes long.
    package static func adoptionChunks(_ sizes: [Int64], files: Int = 256, bytes: Int64 = 256 << 20) -> [Range<Int>] {
        var chunks: [Range<Int>] = []
        var start = 0
        var total: Int64 = 0
        for (i, size) in sizes.enumerated() {
            if i > start && (i - start == files || total + size > bytes) {
                chunks.append(start..<i)
                start = i
                total = 0
            }
            total += size
        }
        if start < sizes.count { chunks.append(start..<sizes.count) }
        return chunks
    }

    /// What a copy's path holds at a survey, when it is not the copy as it was recorded.
    private enum Look: Sendable {
        case same(device: UInt64, inode: UInt64)
        case missing
    }
}

extension MirrorSurvey {
    /// A full pass's look at the folder: `run`, what it found said in the log. False: it
    /// could not look (said too).
    func look(adopt: Bool, inFlight: Set<MD5Value>, now: @escaping @Sendable () -> Date, logger: Logger) async -> Bool {
        let r: Result
        do {
            r = try await run(adopt: adopt, inFlight: inFlight, now: now, cancelled: { false })
        } catch {
            logger.error("the mirror could not look at its folder: \(error)")
            return false
        }
        if r.adopted + r.moved + r.removed + r.temporaries > 0 {
            logger.notice("the mirror looked at its folder", metadata: [
                "adopted": "\(r.adopted)", "moved": "\(r.moved)", "removedHere": "\(r.removed)", "temporaryFilesRemoved": "\(r.temporaries)"])
        }
        for problem in r.problems.prefix(3) { logger.warning("the mirror could not read a folder of its own: \(problem)") }
        return true
    }
}
