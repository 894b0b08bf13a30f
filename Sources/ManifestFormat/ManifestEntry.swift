/// ManifestFormat: the device manifest's values (docs/manifest.md), shared by the stage
/// that writes it and the restore that reads it: the segment codec, the keys and the
/// chain, the replay, the device record, the reader's checks and the frames that carry a
/// manifest to the command. Values only: the bucket is reached through `ManifestObjects`.

import PhotolalaCore

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
        self.init(bytes: Array(bytes))
    }

    /// The same for an array: a manifest reads a million of them, and the generic form,
    /// called from another module, is not specialized (each call looked up metadata).
    package init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        high = Digest.word(bytes, 0)
        low = Digest.word(bytes, 8)
    }

    /// From 32 hex digits (either case); nil for anything else.
    package init?(hex: String) {
        guard let w = Digest.words(hex: hex, count: 2) else { return nil }
        high = w[0]
        low = w[1]
    }

    package var bytes: [UInt8] { Digest.bytes([high, low]) }

    /// 32 lowercase hex digits, as the object's key spells it.
    package var hex: String { Digest.hex([high, low]) }

    package var description: String { hex }

    package static func < (a: MD5Value, b: MD5Value) -> Bool {
        (a.high, a.low) < (b.high, b.low)
    }
}

/// Big-endian words to and from a digest's bytes and hex, without a String or array per word.
private enum Digest {
    static func word(_ bytes: [UInt8], _ from: Int) -> UInt64 {
        var w: UInt64 = 0
        for i in from..<(from + 8) { w = w << 8 | UInt64(bytes[i]) }
        return w
    }

    static func bytes(_ words: [UInt64]) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(words.count * 8)
        for w in words {
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: w >> UInt64(shift))) }
        }
        return out
    }

    static let digits = Array("0123456789abcdef".utf8)

    /// `count` words from exactly `16 * count` hex digits (either case); nil for anything else.
    static func words(hex: String, count: Int) -> [UInt64]? {
        let utf8 = hex.utf8
        guard utf8.count == 16 * count else { return nil }
        return utf8.withContiguousStorageIfAvailable { digits -> [UInt64]? in
            var out = [UInt64](repeating: 0, count: count)
            for (i, c) in digits.enumerated() {
                let v: UInt8
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c &- UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): v = c &- UInt8(ascii: "a") &+ 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): v = c &- UInt8(ascii: "A") &+ 10
                default: return nil
                }
                out[i / 16] = out[i / 16] << 4 | UInt64(v)
            }
            return out
        } ?? words(hex: String(decoding: Array(utf8), as: UTF8.self), count: count)
    }

    static func hex(_ words: [UInt64]) -> String {
        String(unsafeUninitializedCapacity: words.count * 16) { buffer in
            var i = 0
            for w in words {
                for shift in stride(from: 60, through: 0, by: -4) {
                    buffer[i] = digits[Int(truncatingIfNeeded: (w >> UInt64(shift)) & 0xf)]
                    i += 1
                }
            }
            return i
        }
    }
}

/// A SHA-256 as four words, for the same reason as `MD5Value`.
package struct SHA256Value: Hashable, Sendable, CustomStringConvertible {
    package var words: (UInt64, UInt64, UInt64, UInt64)

    /// From the 32 digest bytes; nil for any other count.
    package init?(bytes: some Collection<UInt8>) {
        self.init(bytes: Array(bytes))
    }

    /// The same for an array, unspecialized-generic-free (see `MD5Value.init(bytes:)`).
    package init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        words = (Digest.word(bytes, 0), Digest.word(bytes, 8), Digest.word(bytes, 16), Digest.word(bytes, 24))
    }

    /// From 64 hex digits (either case); nil for anything else.
    package init?(hex: String) {
        guard let w = Digest.words(hex: hex, count: 4) else { return nil }
        words = (w[0], w[1], w[2], w[3])
    }

    package var bytes: [UInt8] { Digest.bytes([words.0, words.1, words.2, words.3]) }

    package var hex: String { Digest.hex([words.0, words.1, words.2, words.3]) }

    package var description: String { hex }

    package static func == (a: SHA256Value, b: SHA256Value) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
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
    /// The SHA-256 of the same bytes (format 2; nil when it was not known: a file backed
    /// up before the daemon took it). A restore checks it as well as the MD5, which
    /// names the object but no longer resists a forger (MD5 collisions are practical).
    package var sha256: SHA256Value?

    package init(size: Int64, md5: MD5Value, mtimeSec: Int64, mtimeNsec: Int64, sha256: SHA256Value? = nil) {
        self.size = size
        self.md5 = md5
        self.mtimeSec = mtimeSec
        self.mtimeNsec = mtimeNsec
        self.sha256 = sha256
    }
}

/// Who owned a file or folder on the device it was backed up from, and its permission
/// bits (privacy.md "Owners and modes"; recorded from manifest format 2).
package struct Ownership: Sendable, Equatable, Hashable {
    package var uid: UInt32
    package var gid: UInt32
    package var user: String?
    package var group: String?
    /// The permission bits as recorded (`st_mode & 0o7777`).
    package var mode: UInt32

    package init(uid: UInt32, gid: UInt32, user: String? = nil, group: String? = nil, mode: UInt32) {
        self.uid = uid
        self.gid = gid
        self.user = user
        self.group = group
        self.mode = mode
    }

    /// Equal ids and mode, and names equal byte for byte (`==` on names would take two
    /// Unicode spellings of one name for the same, and the record must keep the one seen).
    package func sameBytes(as other: Ownership?) -> Bool {
        guard let other, uid == other.uid, gid == other.gid, mode == other.mode else { return false }
        return Self.sameBytes(user, other.user) && Self.sameBytes(group, other.group)
    }

    private static func sameBytes(_ a: String?, _ b: String?) -> Bool {
        switch (a, b) {
        case (nil, nil): true
        case let (a?, b?): ExactPath.bytesEqual(a, b)
        default: false
        }
    }
}

/// A modification time as the filesystem keeps it.
package struct FileTime: Hashable, Sendable {
    package var sec: Int64
    /// 0 ≤ nsec < 1,000,000,000.
    package var nsec: Int64

    package init(sec: Int64, nsec: Int64) {
        self.sec = sec
        self.nsec = nsec
    }
}

/// One change of one file, as the manifest records it: it appeared with these bytes, its
/// bytes (or modification time, owner or mode) changed, or it went away; or, from format
/// 2, a folder below a watched folder with its owner and mode (new, or changed). Entries
/// are facts in the order they happened; replaying them up to a time gives the folder
/// tree at that time.
package struct ManifestEntry: Hashable, Sendable {
    package enum Kind: UInt8, Sendable {
        case appeared = 1
        case changed = 2
        case gone = 3
        /// A folder's owner, group, mode and time (format 2).
        case folder = 4
    }

    package var kind: Kind
    /// The watched folder, as configured on the device (absolute).
    package var folder: String
    /// The path below the folder, without a leading '/': the exact bytes of the names,
    /// so Unicode twins (NFC and NFD spellings) stay two files, and bytes that are not
    /// UTF-8 survive. Empty only for a folder record of the watched folder itself.
    package var path: [UInt8]
    /// When the daemon recorded the change (for a file that appeared or changed: once its
    /// object was in the bucket), in milliseconds since the Unix epoch.
    package var time: Int64
    /// What the file held; nil exactly when it went away, and for a folder.
    package var version: FileVersion?
    /// Its owner, group and mode when known (format 2; always for a folder record).
    package var owner: Ownership?
    /// A folder's modification time (folder records only; a file's is in its version).
    package var mtime: FileTime?

    package init(kind: Kind, folder: String, path: [UInt8], time: Int64, version: FileVersion?, owner: Ownership? = nil,
                 mtime: FileTime? = nil) {
        self.kind = kind
        self.folder = folder
        self.path = path
        self.time = time
        self.version = version
        self.owner = owner
        self.mtime = mtime
    }
}
