import ManifestFormat
import RestoreWire

/// Where `restore --by-date` puts each object (privacy.md "Export every photo of the
/// account"): `YYYY/MM/YYYY-MM-DD HH.MM.SS <first 8 hex of its MD5>.<ext>` below `--to`,
/// dated in UTC by the catalog's `photo_date` when it lies in 1970–2099 (the catalog is
/// app-writable), else by the object's last-modified time, and that date is also the
/// file's modification time. Every part of the name is made here from numbers and hex
/// digits: nothing the bucket says becomes a path.
package enum ExportName {
    /// 1970-01-01T00:00:00Z and 2100-01-01T00:00:00Z: a date is used when it lies in between.
    package static let earliest: Int64 = 0
    package static let end: Int64 = 4_102_444_800

    package enum DateSource: String, Sendable, Equatable, Codable {
        /// The catalog row's `photo_date`.
        case catalog
        /// The object's last-modified time (no row, or a row dated outside 1970–2099).
        case object
        /// Neither could be used (the listing gave no time, or one outside 1970–2099):
        /// 1970-01-01, so the file is still written, under a name that says so.
        case none
    }

    package static func inRange(_ seconds: Int64) -> Bool { seconds >= earliest && seconds < end }

    /// The date the file is named and stamped with.
    package static func date(catalog: Int64?, modified: Int64?) -> (seconds: Int64, source: DateSource) {
        if let catalog, inRange(catalog) { return (catalog, .catalog) }
        if let modified, inRange(modified) { return (modified, .object) }
        return (earliest, .none)
    }

    /// `YYYY/MM` and `YYYY-MM-DD HH.MM.SS <md5>.<ext>`; `wholeMD5` for the later of two
    /// objects that would otherwise get the same name.
    package static func path(seconds: Int64, md5: MD5Value, ext: String, wholeMD5: Bool) -> (folder: String, file: String) {
        let t = UTCTime(seconds)
        let folder = "\(pad(t.year, 4))/\(pad(t.month, 2))"
        let stamp = "\(pad(t.year, 4))-\(pad(t.month, 2))-\(pad(t.day, 2)) \(pad(t.hour, 2)).\(pad(t.minute, 2)).\(pad(t.second, 2))"
        let hex = md5.hex
        return (folder, "\(stamp) \(wholeMD5 ? hex : String(hex.prefix(8))).\(ExportFormat.known(ext))")
    }

    /// An object's file, and where its date came from.
    package struct Planned: Sendable, Equatable {
        package var item: RestoreItem
        package var dated: DateSource
        package var storageClass: String
    }

    /// Every object's file below `to`, each object once (the first of an MD5 listed twice),
    /// in key order (the MD5's: every key is `photos/{userId}/{md5}.dat`); the later of
    /// two objects that would get the same name takes its whole MD5.
    package static func plan(_ objects: [ExportObject], to: String) -> [Planned] {
        var root = to
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        let ordered = objects.enumerated().sorted { a, b in a.element.md5 != b.element.md5 ? a.element.md5 < b.element.md5 : a.offset < b.offset }
        var taken = Set<ShortName>()
        var out: [Planned] = []
        out.reserveCapacity(objects.count)
        var previous: MD5Value?
        for (_, o) in ordered {
            if o.md5 == previous { continue }
            previous = o.md5
            let (seconds, source) = date(catalog: o.catalogDate, modified: o.modified)
            let ext = ExportFormat.known(o.ext)
            let whole = !taken.insert(ShortName(seconds: seconds, prefix: UInt32(truncatingIfNeeded: o.md5.high >> 32), ext: ext)).inserted
            let (folder, file) = path(seconds: seconds, md5: o.md5, ext: ext, wholeMD5: whole)
            let name = Array(file.utf8)
            let item = RestoreItem(folder: "", path: name, version: FileVersion(size: o.size, md5: o.md5, mtimeSec: seconds, mtimeNsec: 0),
                                   root: root, destination: Array(folder.utf8) + [UInt8(ascii: "/")] + name)
            out.append(Planned(item: item, dated: source, storageClass: o.storageClass))
        }
        return out
    }

    /// What makes two short names equal: the second, the MD5's first 8 hex digits, the extension.
    private struct ShortName: Hashable {
        var seconds: Int64
        var prefix: UInt32
        var ext: String
    }

    private static func pad(_ n: Int64, _ width: Int) -> String {
        let s = String(n)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}

/// A Unix time as a UTC calendar date and time of day (the proleptic Gregorian calendar,
/// days from civil by Howard Hinnant's algorithm): no time zone, no Foundation calendar.
package struct UTCTime: Sendable, Equatable {
    package var year: Int64
    package var month: Int64
    package var day: Int64
    package var hour: Int64
    package var minute: Int64
    package var second: Int64

    package init(_ seconds: Int64) {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let rest = seconds - days * 86_400
        hour = rest / 3600
        minute = rest % 3600 / 60
        second = rest % 60
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        day = doy - (153 * mp + 2) / 5 + 1
        month = mp < 10 ? mp + 3 : mp - 9
        year = yoe + era * 400 + (month <= 2 ? 1 : 0)
    }
}
