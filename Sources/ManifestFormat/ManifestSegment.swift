import Digests
import Foundation
import PhotolalaCore

/// One object of the manifest: a log segment, a part of a snapshot, or a snapshot's
/// index. Self-checking: the SHA-256 of everything after it sits right behind the magic,
/// so a reader trusts only what matches, and a write cut short (or a byte flipped at
/// rest) can never pass for a complete segment. Layout (docs/manifest.md):
///
///     "PLMANIF" 0x01 | SHA-256 of the rest (32) | header length (u32 BE) | header (JSON) | records
package struct ManifestSegment: Sendable, Equatable {
    package static let magic: [UInt8] = Array("PLMANIF".utf8) + [1]
    package static let formatVersion = 1

    package var header: ManifestHeader
    package var entries: [ManifestEntry]

    package init(header: ManifestHeader, entries: [ManifestEntry]) {
        self.header = header
        self.entries = entries
    }

    /// The object's bytes. The header's `folders` (and, but for an index, `entries`) are filled from `entries`.
    package func encoded() -> [UInt8] {
        var encoder = ManifestSegmentEncoder(header: header)
        for entry in entries { encoder.append(entry) }
        return encoder.finish()
    }

    /// The SHA-256 an object carries (bytes 8..<40), as hex: how an index names its parts.
    package static func digestHex(of object: [UInt8]) -> String? {
        guard object.count >= 40 else { return nil }
        return Hex.string(Array(object[8..<40]))
    }

    /// Reads and checks an object: magic, digest, header, then every record.
    package static func decode(_ object: [UInt8]) throws(ManifestFormatError) -> ManifestSegment {
        guard object.count >= 44 else { throw .truncated }
        guard Array(object[0..<8]) == magic else { throw .notAManifest }
        let rest = Array(object[40...])
        guard SHA256.digest(rest) == Array(object[8..<40]) else { throw .digestMismatch }
        var reader = ManifestByteReader(rest)
        guard let length = reader.u32(), let headerBytes = reader.take(Int(length)) else { throw .badHeader("header length beyond the end") }
        let header: ManifestHeader
        do {
            header = try JSONDecoder().decode(ManifestHeader.self, from: Data(headerBytes))
        } catch {
            throw .badHeader("\(error)")
        }
        guard header.format == formatVersion else { throw .badHeader("format \(header.format) is not \(formatVersion)") }
        var entries: [ManifestEntry] = []
        entries.reserveCapacity(min(header.entries, 1 << 20))
        var previousPath: [UInt8] = []
        var previousTime: Int64 = 0
        // An index counts its parts' records and holds none itself.
        let records = header.kind == .snapshotIndex ? 0 : header.entries
        guard records >= 0 else { throw .badHeader("a negative record count") }
        for index in 0..<records {
            guard let entry = decodeEntry(&reader, folders: header.folders, previousPath: previousPath, previousTime: previousTime) else {
                throw .badRecord(index)
            }
            entries.append(entry)
            previousPath = entry.path
            previousTime = entry.time
        }
        guard reader.atEnd else { throw .trailingBytes }
        return ManifestSegment(header: header, entries: entries)
    }

    // MARK: records

    /// folder, shared prefix, suffix, kind, time delta, then (unless gone) size, MD5, mtime.
    static func encode(_ e: ManifestEntry, folder: Int, previousPath: [UInt8], previousTime: Int64, into w: inout ManifestByteWriter) {
        var shared = 0
        let limit = min(previousPath.count, e.path.count)
        while shared < limit && previousPath[shared] == e.path[shared] { shared += 1 }
        w.uvarint(UInt64(folder))
        w.uvarint(UInt64(shared))
        w.uvarint(UInt64(e.path.count - shared))
        w.append(e.path[shared...])
        w.bytes.append(e.kind.rawValue)
        w.svarint(e.time &- previousTime)
        if let v = e.version {
            w.uvarint(UInt64(max(0, v.size)))
            w.append(v.md5.bytes)
            w.svarint(v.mtimeSec)
            w.uvarint(UInt64(max(0, v.mtimeNsec)))
        }
    }

    static func decodeEntry(_ r: inout ManifestByteReader, folders: [String], previousPath: [UInt8], previousTime: Int64) -> ManifestEntry? {
        guard let folder = r.uvarint(), folder < UInt64(folders.count),
              let shared = r.uvarint(), shared <= UInt64(previousPath.count),
              let suffixLength = r.uvarint(), suffixLength <= UInt64(r.bytes.count), let suffix = r.take(Int(suffixLength)),
              let rawKind = r.byte(), let kind = ManifestEntry.Kind(rawValue: rawKind),
              let delta = r.svarint() else { return nil }
        let path = Array(previousPath[0..<Int(shared)]) + suffix
        guard !path.isEmpty else { return nil }
        var version: FileVersion?
        if kind != .gone {
            guard let size = r.uvarint(), size <= UInt64(Int64.max), let md5Bytes = r.take(16), let md5 = MD5Value(bytes: md5Bytes),
                  let mtimeSec = r.svarint(), let nsec = r.uvarint(), nsec < 1_000_000_000 else { return nil }
            version = FileVersion(size: Int64(size), md5: md5, mtimeSec: mtimeSec, mtimeNsec: Int64(nsec))
        }
        return ManifestEntry(kind: kind, folder: folders[Int(folder)], path: path, time: previousTime &+ delta, version: version)
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

    package var description: String {
        switch self {
        case .truncated: "it is too short to be a manifest segment (cut short?)"
        case .notAManifest: "it does not start with the manifest's magic bytes"
        case .digestMismatch: "its bytes do not match the SHA-256 it carries (damaged or cut short)"
        case .badHeader(let why): "its header cannot be read: \(why)"
        case .badRecord(let index): "record \(index) cannot be read"
        case .trailingBytes: "it has bytes after its last record"
        }
    }
}
