/// ManifestFormat: the device manifest's values (docs/manifest.md), shared by the stage
/// that writes it and the restore that reads it: the segment codec, the keys and the
/// chain, the replay, the device record, the reader's checks and the frames that carry a
/// manifest to the command. Values only: the bucket is reached through `ManifestObjects`.

/// An MD5 as two words: a manifest of a million files holds a million of them, and two
/// words cost no allocation where a hex string costs one each.
package struct MD5Value: Hashable, Sendable, Comparable, CustomStringConvertible {
    package var high: UInt64
    package var low: UInt64

    package init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// From the 16 digest bytes; nil for any other count.
    package init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var h: UInt64 = 0
        var l: UInt64 = 0
        for (i, b) in bytes.enumerated() {
            if i < 8 { h = h << 8 | UInt64(b) } else { l = l << 8 | UInt64(b) }
        }
        high = h
        low = l
    }

    /// From 32 hex digits (either case); nil for anything else.
    package init?(hex: String) {
        guard hex.utf8.count == 32, let h = UInt64(hex.prefix(16), radix: 16), let l = UInt64(hex.suffix(16), radix: 16) else { return nil }
        high = h
        low = l
    }

    package var bytes: [UInt8] {
        (0..<16).map { i in UInt8(truncatingIfNeeded: (i < 8 ? high >> (56 - 8 * i) : low >> (56 - 8 * (i - 8)))) }
    }

    /// 32 lowercase hex digits, as the object's key spells it.
    package var hex: String {
        let h = String(high, radix: 16)
        let l = String(low, radix: 16)
        return String(repeating: "0", count: 16 - h.count) + h + String(repeating: "0", count: 16 - l.count) + l
    }

    package var description: String { hex }

    package static func < (a: MD5Value, b: MD5Value) -> Bool {
        (a.high, a.low) < (b.high, b.low)
    }
}

/// What a file held at one moment: enough to find its object and put it back as it was.
package struct FileVersion: Hashable, Sendable {
    package var size: Int64
    package var md5: MD5Value
    /// The file's modification time: seconds since the Unix epoch (negative before 1970)…
    package var mtimeSec: Int64
    /// …and the nanoseconds within that second (0..<1,000,000,000).
    package var mtimeNsec: Int64

    package init(size: Int64, md5: MD5Value, mtimeSec: Int64, mtimeNsec: Int64) {
        self.size = size
        self.md5 = md5
        self.mtimeSec = mtimeSec
        self.mtimeNsec = mtimeNsec
    }
}

/// One change of one file, as the manifest records it: it appeared with these bytes, its
/// bytes (or modification time) changed, or it went away. Entries are facts in the order
/// they happened; replaying them up to a time gives the folder tree at that time.
package struct ManifestEntry: Hashable, Sendable {
    package enum Kind: UInt8, Sendable {
        case appeared = 1
        case changed = 2
        case gone = 3
    }

    package var kind: Kind
    /// The watched folder, as configured on the device (absolute).
    package var folder: String
    /// The path below the folder, without a leading '/': the exact bytes of the names,
    /// so Unicode twins (NFC and NFD spellings) stay two files, and bytes that are not
    /// UTF-8 survive.
    package var path: [UInt8]
    /// When the daemon recorded the change (for a file that appeared or changed: once its
    /// object was in the bucket), in milliseconds since the Unix epoch.
    package var time: Int64
    /// What the file held; nil exactly when it went away.
    package var version: FileVersion?

    package init(kind: Kind, folder: String, path: [UInt8], time: Int64, version: FileVersion?) {
        self.kind = kind
        self.folder = folder
        self.path = path
        self.time = time
        self.version = version
    }
}
