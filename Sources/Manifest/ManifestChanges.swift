import Foundation
import ManifestFormat
import PhotolalaCore
import Queue

/// What one changed path means for the manifest, as a pure rule: a file whose object is
/// in the bucket (`uploaded`) appeared, or changed if its bytes, modification time, owner
/// or mode differ from the last entry; a file gone (or moved away) that the manifest holds
/// went away; anything else (being read again, waiting, failed) changes nothing yet, so
/// the manifest keeps the last version the bucket holds.
enum ManifestChanges {
    /// The record to write for `c`, or nil when the manifest already says it.
    /// - Parameters:
    ///   - names: the owner with its user and group names (resolved here, at manifest time).
    ///   - notBefore: the newest time already in the manifest: a record never goes before
    ///     it, so the records of a later segment are never older than those of an earlier
    ///     one, and a manifest cut short is whole for any time before its last record.
    static func record(for c: ManifestCandidate, folders: [String], now: Date, notBefore: Int64 = .min,
                       names: (FileOwner) -> Ownership = { Ownership(uid: $0.uid, gid: $0.gid, mode: $0.mode) }) -> ManifestRecord? {
        let wasPresent = c.current.map { !$0.isGone } ?? false
        if let f = c.file, f.state == .uploaded, let md5 = f.md5 {
            guard let folder = folder(of: c.path, current: c.current, in: folders) else { return nil }
            if wasPresent, let cur = c.current, cur.size == f.size, cur.md5 == md5,
               cur.mtimeSec == f.mtimeSec, cur.mtimeNsec == f.mtimeNsec, sameOwner(cur.owner, f.owner) {
                return nil
            }
            return ManifestRecord(kind: wasPresent ? 2 : 1, path: c.path, folder: folder, time: max(millis(f.updatedAt), notBefore),
                                  size: f.size, md5: md5, mtimeSec: f.mtimeSec, mtimeNsec: f.mtimeNsec, sha256: f.sha256,
                                  owner: f.owner.map(names))
        }
        guard c.file == nil || c.file?.state == .gone, wasPresent, let cur = c.current else { return nil }
        return ManifestRecord(kind: 3, path: c.path, folder: cur.folder, time: max(millis(c.file?.updatedAt ?? now.timeIntervalSince1970), notBefore),
                              size: nil, md5: nil, mtimeSec: nil, mtimeNsec: nil)
    }

    /// Whether the owner recorded still holds: a file whose owner is unknown (hashed before
    /// the daemon recorded owners) changes nothing by it.
    static func sameOwner(_ recorded: Ownership?, _ now: FileOwner?) -> Bool {
        guard let now else { return true }
        guard let recorded else { return false }
        return recorded.uid == now.uid && recorded.gid == now.gid && recorded.mode == now.mode
    }

    /// The watched folder a path belongs to: the folder its last entry named if it still
    /// holds it, else the innermost watched folder that does; nil outside them all.
    static func folder(of path: String, current: ManifestRecord? = nil, in folders: [String]) -> String? {
        if let cur = current, PathNames.isInside(path, cur.folder) { return cur.folder }
        return folders.filter { PathNames.isInside(path, $0) }.max { $0.utf8.count < $1.utf8.count }
    }

    /// The bytes of `path` below `folder` (no leading '/'; empty for the folder itself).
    static func relative(_ path: String, to folder: String) -> [UInt8] {
        if path.utf8.elementsEqual(folder.utf8) { return [] }
        let drop = folder == "/" ? 1 : folder.utf8.count + 1
        return Array(path.utf8.dropFirst(drop))
    }

    /// The folders a file's record brings with it: each folder from its watched folder
    /// (included) down to the one holding it, outermost first.
    static func folders(above path: String, in folder: String) -> [String] {
        guard PathNames.isInside(path, folder) else { return [] }
        var out = [folder]
        let rest = relative(path, to: folder).split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropLast()
        var current = folder == "/" ? "" : folder
        for component in rest {
            current += "/" + String(decoding: component, as: UTF8.self)
            out.append(current)
        }
        return out
    }

    /// The format's entry for a mirrored record; nil for one that cannot be written (a
    /// record outside its folder, an MD5 that is not 32 hex digits).
    static func entry(_ r: ManifestRecord) -> ManifestEntry? {
        guard let kind = ManifestEntry.Kind(rawValue: UInt8(clamping: r.kind)) else { return nil }
        if kind == .folder {
            guard r.path.utf8.elementsEqual(r.folder.utf8) || PathNames.isInside(r.path, r.folder), let owner = r.owner else { return nil }
            return ManifestEntry(kind: .folder, folder: r.folder, path: relative(r.path, to: r.folder), time: r.time, version: nil,
                                 owner: owner, mtime: FileTime(sec: r.mtimeSec ?? 0, nsec: r.mtimeNsec ?? 0))
        }
        guard PathNames.isInside(r.path, r.folder) else { return nil }
        var version: FileVersion?
        if kind != .gone {
            guard let size = r.size, let md5 = r.md5.flatMap(MD5Value.init(hex:)), let sec = r.mtimeSec, let nsec = r.mtimeNsec else { return nil }
            version = FileVersion(size: size, md5: md5, mtimeSec: sec, mtimeNsec: nsec, sha256: r.sha256.flatMap { SHA256Value(bytes: $0) })
        }
        return ManifestEntry(kind: kind, folder: r.folder, path: relative(r.path, to: r.folder), time: r.time, version: version,
                             owner: kind == .gone ? nil : r.owner)
    }

    /// The mirror's record for an entry read back from the bucket; nil when its path is
    /// not UTF-8 (this daemon never writes such a path: it skips those names).
    static func record(_ e: ManifestEntry) -> ManifestRecord? {
        guard let rel = String(validating: e.path, as: UTF8.self) else { return nil }
        let path = rel.isEmpty ? e.folder : (e.folder == "/" ? "" : e.folder) + "/" + rel
        return ManifestRecord(kind: Int(e.kind.rawValue), path: path, folder: e.folder, time: e.time, size: e.version?.size,
                              md5: e.version?.md5.hex, mtimeSec: e.version?.mtimeSec ?? e.mtime?.sec,
                              mtimeNsec: e.version?.mtimeNsec ?? e.mtime?.nsec, sha256: e.version?.sha256?.bytes, owner: e.owner)
    }

    static func millis(_ seconds: Double) -> Int64 {
        Int64((seconds * 1000).rounded())
    }
}
