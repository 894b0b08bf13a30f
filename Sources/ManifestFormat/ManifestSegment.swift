import Digests
import Foundation
import PhotolalaCore
import Vault

/// One object of the manifest: a log segment, a part of a snapshot, or a snapshot's
/// index, in either of its two formats (docs/manifest.md):
///
///     format 1 (plaintext):  "PLMANIF" 0x01 | SHA-256 of the rest (32) | header length (u32 BE) | header (JSON) | records
///     format 2 (sealed):     "PLMANIF" 0x02 | nonce (12) | AES-256-GCM(header length | zlib(header) | records) | tag (16)
///
/// Format 1 checks itself with an unkeyed digest (anyone can recompute it); format 2 is
/// sealed under the account's metadata key with the object's key as associated data
/// (`SealedObject`), and chained: each header names the SHA-256 of the segment before it.
/// This daemon writes format 2 only; format 1 is read to upgrade it and, when the user
/// allows it, to restore from a NAS that never upgraded.
package struct ManifestSegment: Sendable, Equatable {
    package static let magic: [UInt8] = Array("PLMANIF".utf8) + [1]
    package static let formatVersion = 1
    package static let sealedFormat = 2

    package var header: ManifestHeader
    package var entries: [ManifestEntry]

    package init(header: ManifestHeader, entries: [ManifestEntry]) {
        self.header = header
        self.entries = entries
    }

    /// The format-1 object's bytes. The header's `folders` (and, but for an index,
    /// `entries`) are filled from `entries`.
    package func encoded() -> [UInt8] {
        var encoder = ManifestSegmentEncoder(header: header, format: Self.formatVersion)
        for entry in entries { encoder.append(entry) }
        return encoder.finish()
    }

    /// The format-2 object's bytes, sealed for `objectKey`.
    package func sealed(key: MetadataKey, objectKey: String) -> [UInt8] {
        var encoder = ManifestSegmentEncoder(header: header, format: Self.sealedFormat)
        for entry in entries { encoder.append(entry) }
        return encoder.sealed(key: key, objectKey: objectKey)
    }

    /// The SHA-256 a format-1 object carries (bytes 8..<40), as hex: how an index names its parts.
    package static func digestHex(of object: [UInt8]) -> String? {
        guard object.count >= 40 else { return nil }
        return Hex.string(Array(object[8..<40]))
    }

    /// The SHA-256 of a format-2 object's sealed bytes, as hex: how the chain and an index
    /// name it.
    package static func sealedDigestHex(of object: [UInt8]) -> String {
        SHA256.hexDigest(object)
    }

    /// Reads and checks a format-1 object: magic, digest, header, then every record.
    package static func decode(_ object: [UInt8]) throws(ManifestFormatError) -> ManifestSegment {
        guard object.count >= 44 else { throw .truncated }
        guard Array(object[0..<8]) == magic else { throw .notAManifest }
        let rest = Array(object[40...])
        guard SHA256.digest(rest) == Array(object[8..<40]) else { throw .digestMismatch }
        return try decodeBody(rest, format: formatVersion)
    }

    /// Opens a format-2 object stored at `objectKey` and reads it; also returns its
    /// plaintext (what the daemon hands to the command).
    package static func open(_ sealed: [UInt8], key: MetadataKey, objectKey: String) throws(ManifestFormatError) -> (segment: ManifestSegment, plaintext: [UInt8]) {
        let plaintext: [UInt8]
        do {
            plaintext = try SealedObject.open(sealed, key: key, objectKey: objectKey)
        } catch {
            throw .sealed(error.description)
        }
        return (try decode(plaintext: plaintext), plaintext)
    }

    /// Reads a format-2 plaintext (an opened object): header, then every record.
    package static func decode(plaintext: [UInt8]) throws(ManifestFormatError) -> ManifestSegment {
        guard plaintext.count >= 4 else { throw .truncated }
        return try decodeBody(plaintext, format: sealedFormat)
    }

    /// header length, header, records; `format` the one the header must name.
    private static func decodeBody(_ rest: [UInt8], format: Int) throws(ManifestFormatError) -> ManifestSegment {
        var reader = ManifestByteReader(rest)
        guard let length = reader.u32(), let headerBytes = reader.take(Int(length)) else { throw .badHeader("header length beyond the end") }
        guard let json = format == sealedFormat ? SealedJSON.unpack(Array(headerBytes)) : Array(headerBytes) else {
            throw .badHeader("it is neither JSON nor a zlib stream of at most \(SealedJSON.limit >> 20) MiB of it")
        }
        let header: ManifestHeader
        do {
            header = try JSONDecoder().decode(ManifestHeader.self, from: Data(json))
        } catch {
            throw .badHeader("\(error)")
        }
        guard header.format == format else { throw .badHeader("format \(header.format) is not \(format)") }
        var entries: [ManifestEntry] = []
        entries.reserveCapacity(min(header.entries, 1 << 20))
        var state = RecordState()
        // An index counts its parts' records and holds none itself.
        let records = header.kind == .snapshotIndex ? 0 : header.entries
        guard records >= 0 else { throw .badHeader("a negative record count") }
        let names = Names(folders: header.folders, users: header.users ?? [], groups: header.groups ?? [])
        for index in 0..<records {
            let entry = format == formatVersion
                ? decodeEntry(&reader, folders: header.folders, previousPath: state.path, previousTime: state.time)
                : decodeSealedEntry(&reader, names: names, state: &state)
            guard let entry else { throw .badRecord(index) }
            entries.append(entry)
            state.path = entry.path
            state.time = entry.time
        }
        guard reader.atEnd else { throw .trailingBytes }
        return ManifestSegment(header: header, entries: entries)
    }

    // MARK: records, format 1

    /// folder, shared prefix, suffix, kind, time delta, then (unless gone) size, MD5, mtime.
    static func encode(_ e: ManifestEntry, folder: Int, previousPath: [UInt8], previousTime: Int64, into w: inout ManifestByteWriter) {
        encodeCommon(e, folder: folder, previousPath: previousPath, previousTime: previousTime, into: &w)
        if let v = e.version {
            encodeVersion(v, into: &w)
        }
    }

    private static func encodeCommon(_ e: ManifestEntry, folder: Int, previousPath: [UInt8], previousTime: Int64, into w: inout ManifestByteWriter) {
        var shared = 0
        let limit = min(previousPath.count, e.path.count)
        while shared < limit && previousPath[shared] == e.path[shared] { shared += 1 }
        w.uvarint(UInt64(folder))
        w.uvarint(UInt64(shared))
        w.uvarint(UInt64(e.path.count - shared))
        w.append(e.path[shared...])
        w.bytes.append(e.kind.rawValue)
        w.svarint(e.time &- previousTime)
    }

    private static func encodeVersion(_ v: FileVersion, into w: inout ManifestByteWriter) {
        w.uvarint(UInt64(max(0, v.size)))
        w.append(v.md5.bytes)
        w.svarint(v.mtimeSec)
        w.uvarint(UInt64(max(0, v.mtimeNsec)))
    }

    static func decodeEntry(_ r: inout ManifestByteReader, folders: [String], previousPath: [UInt8], previousTime: Int64) -> ManifestEntry? {
        guard let (folder, path, kind, time) = decodeCommon(&r, folders: folders, previousPath: previousPath, previousTime: previousTime),
              kind != .folder, !path.isEmpty else { return nil }
        var version: FileVersion?
        if kind != .gone {
            guard let v = decodeVersion(&r) else { return nil }
            version = v
        }
        return ManifestEntry(kind: kind, folder: folder, path: path, time: time, version: version)
    }

    private static func decodeCommon(_ r: inout ManifestByteReader, folders: [String], previousPath: [UInt8],
                                     previousTime: Int64) -> (String, [UInt8], ManifestEntry.Kind, Int64)? {
        guard let folder = r.uvarint(), folder < UInt64(folders.count),
              let shared = r.uvarint(), shared <= UInt64(previousPath.count),
              let suffixLength = r.uvarint(), suffixLength <= UInt64(r.bytes.count), let suffix = r.take(Int(suffixLength)),
              let rawKind = r.byte(), let kind = ManifestEntry.Kind(rawValue: rawKind),
              let delta = r.svarint() else { return nil }
        return (folders[Int(folder)], Array(previousPath[0..<Int(shared)]) + suffix, kind, previousTime &+ delta)
    }

    private static func decodeVersion(_ r: inout ManifestByteReader) -> FileVersion? {
        guard let size = r.uvarint(), size <= UInt64(Int64.max), let md5Bytes = r.take(16), let md5 = MD5Value(bytes: md5Bytes),
              let mtimeSec = r.svarint(), let nsec = r.uvarint(), nsec < 1_000_000_000 else { return nil }
        return FileVersion(size: Int64(size), md5: md5, mtimeSec: mtimeSec, mtimeNsec: Int64(nsec))
    }

    // MARK: records, format 2: format 1's, then a flags byte, the owner and the SHA-256;
    // folder records (kind 4) carry the folder's time, flags and owner.

    /// What a record is read or written against: the previous record's path, time and owner.
    struct RecordState {
        var path: [UInt8] = []
        var time: Int64 = 0
        var owner: Ownership?
    }

    /// The header's tables a record refers to.
    struct Names {
        var folders: [String]
        var users: [String]
        var groups: [String]
    }

    enum Flag {
        static let sha256: UInt8 = 1
        static let owner: UInt8 = 2
        /// The owner is the previous owner-bearing record's in this object: a burst of a
        /// folder's photos costs a byte for it instead of six.
        static let sameOwner: UInt8 = 4
        static let all: UInt8 = 7
    }

    /// `userIndex` / `groupIndex`: the entry's owner's names in the header's tables, + 1 (0: no name).
    static func encodeSealed(_ e: ManifestEntry, folder: Int, userIndex: Int, groupIndex: Int, state: inout RecordState,
                             into w: inout ManifestByteWriter) {
        encodeCommon(e, folder: folder, previousPath: state.path, previousTime: state.time, into: &w)
        switch e.kind {
        case .gone:
            break
        case .appeared, .changed:
            guard let v = e.version else { return }
            encodeVersion(v, into: &w)
            var flags: UInt8 = v.sha256 == nil ? 0 : Flag.sha256
            flags |= ownerFlag(e.owner, state.owner)
            w.bytes.append(flags)
            if flags & Flag.owner != 0, let o = e.owner { encodeOwner(o, userIndex: userIndex, groupIndex: groupIndex, into: &w) }
            if let sha = v.sha256 { w.append(sha.bytes) }
        case .folder:
            let t = e.mtime ?? FileTime(sec: 0, nsec: 0)
            w.svarint(t.sec)
            w.uvarint(UInt64(max(0, t.nsec)))
            let flags = ownerFlag(e.owner, state.owner)
            w.bytes.append(flags)
            if flags & Flag.owner != 0, let o = e.owner { encodeOwner(o, userIndex: userIndex, groupIndex: groupIndex, into: &w) }
        }
        state.path = e.path
        state.time = e.time
        if let o = e.owner { state.owner = o }
    }

    private static func ownerFlag(_ owner: Ownership?, _ previous: Ownership?) -> UInt8 {
        guard let owner else { return 0 }
        return owner.sameBytes(as: previous) ? Flag.sameOwner : Flag.owner
    }

    private static func encodeOwner(_ o: Ownership, userIndex: Int, groupIndex: Int, into w: inout ManifestByteWriter) {
        w.uvarint(UInt64(o.uid))
        w.uvarint(UInt64(o.gid))
        w.uvarint(UInt64(o.mode & 0o7777))
        w.uvarint(UInt64(userIndex))
        w.uvarint(UInt64(groupIndex))
    }

    static func decodeSealedEntry(_ r: inout ManifestByteReader, names: Names, state: inout RecordState) -> ManifestEntry? {
        guard let (folder, path, kind, time) = decodeCommon(&r, folders: names.folders, previousPath: state.path, previousTime: state.time) else {
            return nil
        }
        // Only a folder record may name the watched folder itself.
        guard !path.isEmpty || kind == .folder else { return nil }
        var entry = ManifestEntry(kind: kind, folder: folder, path: path, time: time, version: nil)
        switch kind {
        case .gone:
            break
        case .appeared, .changed:
            guard var v = decodeVersion(&r), let flags = r.byte(), flags & ~Flag.all == 0,
                  let owner = decodeOwner(&r, flags: flags, names: names, previous: state.owner) else { return nil }
            if flags & Flag.sha256 != 0 {
                guard let bytes = r.take(32), let sha = SHA256Value(bytes: bytes) else { return nil }
                v.sha256 = sha
            }
            entry.version = v
            entry.owner = owner
        case .folder:
            guard let sec = r.svarint(), let nsec = r.uvarint(), nsec < 1_000_000_000, let flags = r.byte(), flags & ~Flag.all == 0,
                  flags & Flag.sha256 == 0, let owner = decodeOwner(&r, flags: flags, names: names, previous: state.owner),
                  let known = owner else { return nil }
            entry.mtime = FileTime(sec: sec, nsec: Int64(nsec))
            entry.owner = known
        }
        if let o = entry.owner { state.owner = o }
        return entry
    }

    /// nil: unreadable; `.some(nil)`: no owner recorded.
    private static func decodeOwner(_ r: inout ManifestByteReader, flags: UInt8, names: Names, previous: Ownership?) -> Ownership?? {
        let explicit = flags & Flag.owner != 0
        let same = flags & Flag.sameOwner != 0
        if explicit && same { return nil }
        if same {
            guard let previous else { return nil }
            return .some(previous)
        }
        guard explicit else { return .some(nil) }
        guard let uid = r.uvarint(), uid <= UInt64(UInt32.max), let gid = r.uvarint(), gid <= UInt64(UInt32.max),
              let mode = r.uvarint(), mode <= 0o7777,
              let user = r.uvarint(), user <= UInt64(names.users.count),
              let group = r.uvarint(), group <= UInt64(names.groups.count) else { return nil }
        return .some(Ownership(uid: UInt32(uid), gid: UInt32(gid), user: user == 0 ? nil : names.users[Int(user) - 1],
                               group: group == 0 ? nil : names.groups[Int(group) - 1], mode: UInt32(mode)))
    }

    static var headerEncoder: JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }
}

/// Why an object is not a manifest segment a reader may trust.
package enum ManifestFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    case truncated
    case notAManifest
    case digestMismatch
    case badHeader(String)
    case badRecord(Int)
    case trailingBytes
    /// A format-2 object that does not open (the sentence says why).
    case sealed(String)

    package var description: String {
        switch self {
        case .truncated: "it is too short to be a manifest segment (cut short?)"
        case .notAManifest: "it does not start with the manifest's magic bytes"
        case .digestMismatch: "its bytes do not match the SHA-256 it carries (damaged or cut short)"
        case .badHeader(let why): "its header cannot be read: \(why)"
        case .badRecord(let index): "record \(index) cannot be read"
        case .trailingBytes: "it has bytes after its last record"
        case .sealed(let why): why
        }
    }
}
