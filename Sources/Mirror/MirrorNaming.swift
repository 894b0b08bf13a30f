import ManifestFormat
import Restore

/// Where a copy goes below the folder: privacy.md's export names (`ExportName`), given one
/// object at a time as the mirror fetches them. The export names a whole listing at once
/// and gives the later of two same names in key order the whole MD5; a mirror that runs
/// for years meets its objects one by one and never renames a file it wrote, so the name
/// taken first keeps it and the newcomer gets the whole MD5 (docs/decisions.md). A name a
/// file of someone else's already holds is never taken either: past the whole MD5, `-2`,
/// `-3`… before the extension.
package enum MirrorNaming {
    /// The n-th name an object may take (0: the export's short name; 1: its whole MD5;
    /// 2 and on: the whole MD5 with `-n`), as a path below the folder.
    package static func candidate(_ n: Int, seconds: Int64, md5: MD5Value, ext: String) -> String {
        let (folder, file) = ExportName.path(seconds: seconds, md5: md5, ext: ext, wholeMD5: n > 0)
        return folder + "/" + (n >= 2 ? numbered(file, n) : file)
    }

    /// How many names are tried before the object is reported as having none.
    package static let maxCandidates = 10

    /// The folder (`YYYY/MM`) an object's file goes in, whatever its extension.
    package static func folder(seconds: Int64) -> String {
        ExportName.path(seconds: seconds, md5: MD5Value(high: 0, low: 0), ext: "bin", wholeMD5: false).folder
    }

    /// `name-n.ext` (`name-n` when there is no extension).
    package static func numbered(_ file: String, _ n: Int) -> String {
        guard let dot = file.lastIndex(of: "."), dot != file.startIndex else { return "\(file)-\(n)" }
        return "\(file[..<dot])-\(n)\(file[dot...])"
    }

    /// Where a copy goes when the account lost its object (`on_cloud_delete = "trash"`):
    /// `.trash/` + the same path; `-n` when something stands there already.
    package static func trash(_ path: String, attempt n: Int) -> String {
        let inTrash = trashFolder + "/" + path
        return n <= 1 ? inTrash : numbered(inTrash, n)
    }

    package static let trashFolder = ".trash"
    /// The marker that says the folder is the mirror's, on a mounted volume (mirror.md).
    package static let marker = ".photolala-mirror"
    /// A copy on its way in: hidden (the watcher skips it), named by the object alone, so a
    /// restart reuses the name; the only files the daemon ever removes.
    package static let temporaryPrefix = ".plmirror-"

    package static func temporaryName(_ md5: MD5Value) -> String { temporaryPrefix + md5.hex + ".tmp" }

    /// Whether a name in the folder is one of the mirror's temporary files.
    package static func isTemporary(_ name: String) -> Bool {
        name.hasPrefix(temporaryPrefix) && name.hasSuffix(".tmp") && name.utf8.count == temporaryPrefix.utf8.count + 32 + 4
            && MD5Value(hex: String(name.dropFirst(temporaryPrefix.count).dropLast(4))) != nil
    }
}
