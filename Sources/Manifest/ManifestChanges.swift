import Foundation
import ManifestFormat
import PhotolalaCore
import Queue

/// What one changed path means for the manifest, as a pure rule: a file whose object is
/// in the bucket (`uploaded`) appeared, or changed if its bytes or modification time
/// differ from the last entry; a file gone (or moved away) that the manifest holds went
/// away; anything else (being read again, waiting, failed) changes nothing yet, so the
/// manifest keeps the last version the bucket holds.
enum ManifestChanges {
    /// The record to write for `c`, or nil when the manifest already says it.
    static func record(for c: ManifestCandidate, folders: [String], now: Date) -> ManifestRecord? {
        let wasPresent = c.current.map { !$0.isGone } ?? false
        if let f = c.file, f.state == .uploaded, let md5 = f.md5 {
            guard let folder = folder(of: c.path, current: c.current, in: folders) else { return nil }
            if wasPresent, let cur = c.current, cur.size == f.size, cur.md5 == md5,
               cur.mtimeSec == f.mtimeSec, cur.mtimeNsec == f.mtimeNsec {
                return nil
            }
            return ManifestRecord(kind: wasPresent ? 2 : 1, path: c.path, folder: folder, time: millis(f.updatedAt),
                                  size: f.size, md5: md5, mtimeSec: f.mtimeSec, mtimeNsec: f.mtimeNsec)
        }
        guard c.file == nil || c.file?.state == .gone, wasPresent, let cur = c.current else { return nil }
        return ManifestRecord(kind: 3, path: c.path, folder: cur.folder, time: millis(c.file?.updatedAt ?? now.timeIntervalSince1970),
                              size: nil, md5: nil, mtimeSec: nil, mtimeNsec: nil)
    }

    /// The watched folder a path belongs to: the folder its last entry named if it still
    /// holds it, else the innermost watched folder that does; nil outside them all.
    static func folder(of path: String, current: ManifestRecord? = nil, in folders: [String]) -> String? {
        if let cur = current, PathNames.isInside(path, cur.folder) { return cur.folder }
        return folders.filter { PathNames.isInside(path, $0) }.max { $0.utf8.count < $1.utf8.count }
    }

    /// The bytes of `path` below `folder` (no leading '/').
    static func relative(_ path: String, to folder: String) -> [UInt8] {
        let drop = folder == "/" ? 1 : folder.utf8.count + 1
        return Array(path.utf8.dropFirst(drop))
    }

    /// The format's entry for a mirrored record; nil for one that cannot be written (a
    /// record outside its folder, an MD5 that is not 32 hex digits).
    static func entry(_ r: ManifestRecord) -> ManifestEntry? {
        guard PathNames.isInside(r.path, r.folder), let kind = ManifestEntry.Kind(rawValue: UInt8(clamping: r.kind)) else { return nil }
        var version: FileVersion?
        if kind != .gone {
            guard let size = r.size, let md5 = r.md5.flatMap(MD5Value.init(hex:)), let sec = r.mtimeSec, let nsec = r.mtimeNsec else { return nil }
            version = FileVersion(size: size, md5: md5, mtimeSec: sec, mtimeNsec: nsec)
        }
        return ManifestEntry(kind: kind, folder: r.folder, path: relative(r.path, to: r.folder), time: r.time, version: version)
    }

    /// The mirror's record for an entry read back from the bucket; nil when its path is
    /// not UTF-8 (this daemon never writes such a path: it skips those names).
    static func record(_ e: ManifestEntry) -> ManifestRecord? {
        guard let rel = String(validating: e.path, as: UTF8.self) else { return nil }
        let path = (e.folder == "/" ? "" : e.folder) + "/" + rel
        return ManifestRecord(kind: Int(e.kind.rawValue), path: path, folder: e.folder, time: e.time, size: e.version?.size,
                              md5: e.version?.md5.hex, mtimeSec: e.version?.mtimeSec, mtimeNsec: e.version?.mtimeNsec)
    }

    static func millis(_ seconds: Double) -> Int64 {
        Int64((seconds * 1000).rounded())
    }
}
