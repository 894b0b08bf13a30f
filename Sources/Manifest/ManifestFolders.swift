import ManifestFormat
import PhotolalaCore

/// The folder records a batch of file records brings: each folder from the watched
/// folder down to the files' own, stat'ed now, whose owner, group or mode the manifest
/// does not hold yet. A folder's time alone changing (a file added) is not a change.
struct ManifestFolders {
    /// The folders above the batch's files, each once, in the order met.
    private(set) var paths: [String] = []
    /// Each folder's watched folder.
    private var seen = ExactKeyed<String>()

    init(_ records: [ManifestRecord]) {
        // Files come in runs of one folder: a file whose folder is the previous file's adds
        // nothing, and comparing bytes costs less than building and hashing its folders.
        var previous: (path: String, folder: String)?
        for r in records where r.kind == 1 || r.kind == 2 {
            if let p = previous, ExactPath.bytesEqual(p.folder, r.folder), ExactPath.sameParent(p.path, r.path) { continue }
            previous = (r.path, r.folder)
            for f in ManifestChanges.folders(above: r.path, in: r.folder) where seen[f] == nil {
                seen[f] = r.folder
                paths.append(f)
            }
        }
    }

    /// The records of those folders whose owner differs from the manifest's last record of
    /// each (`known`), stat'ed now.
    func records(known: ExactKeyed<ManifestRecord>, time: Int64, names: inout OwnerNames) -> [ManifestRecord] {
        var out: [ManifestRecord] = []
        for path in paths {
            guard let (owner, mtime) = FolderStat.of(path), let folder = seen[path] else { continue }
            if let last = known[path], ManifestChanges.sameOwner(last.owner, owner) { continue }
            out.append(ManifestRecord(kind: 4, path: path, folder: folder, time: time, size: nil, md5: nil, mtimeSec: mtime.sec,
                                      mtimeNsec: mtime.nsec, owner: names.ownership(owner)))
        }
        return out
    }
}
