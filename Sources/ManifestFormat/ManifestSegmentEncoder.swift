import Digests
import Foundation
import PhotolalaCore
import Vault

/// Builds a segment's bytes one record at a time, so a snapshot part is encoded while its
/// records are read from the queue, never held as a list: only the body's bytes (under a
/// megabyte a part) stay in memory. The header's folders (and, in format 2, its user and
/// group names) are collected as records name them.
package struct ManifestSegmentEncoder: Sendable {
    private var header: ManifestHeader
    private let format: Int
    private var folderIndex = ExactKeyed<Int>()
    private var folders: [String] = []
    private var userIndex = ExactKeyed<Int>()
    private var users: [String] = []
    private var groupIndex = ExactKeyed<Int>()
    private var groups: [String] = []
    /// The previous entry's folder and names with their indices: records come in runs of
    /// one folder and one owner, and a byte comparison costs less than hashing the name.
    private var lastFolder: (name: String, index: Int)?
    private var lastUser: (name: String, index: Int)?
    private var lastGroup: (name: String, index: Int)?
    private var body = ManifestByteWriter()
    private var state = ManifestSegment.RecordState()
    package private(set) var count = 0

    /// `format`: 2 (sealed, what the daemon writes) or 1 (the plaintext format it upgrades).
    package init(header: ManifestHeader, format: Int = ManifestSegment.sealedFormat) {
        self.header = header
        self.format = format
    }

    package mutating func append(_ entry: ManifestEntry) {
        // Format 1 has no folder records.
        if format == ManifestSegment.formatVersion && entry.kind == .folder { return }
        let folder = Self.index(of: entry.folder, last: &lastFolder, in: &folderIndex, &folders)
        if format == ManifestSegment.formatVersion {
            ManifestSegment.encode(entry, folder: folder, previousPath: state.path, previousTime: state.time, into: &body)
            state.path = entry.path
            state.time = entry.time
        } else {
            let user = entry.owner?.user.map { Self.index(of: $0, last: &lastUser, in: &userIndex, &users) + 1 } ?? 0
            let group = entry.owner?.group.map { Self.index(of: $0, last: &lastGroup, in: &groupIndex, &groups) + 1 } ?? 0
            ManifestSegment.encodeSealed(entry, folder: folder, userIndex: user, groupIndex: group, state: &state, into: &body)
        }
        count += 1
    }

    private static func index(of name: String, last: inout (name: String, index: Int)?, in index: inout ExactKeyed<Int>,
                              _ list: inout [String]) -> Int {
        if let last, ExactPath.bytesEqual(last.name, name) { return last.index }
        let found: Int
        if let known = index[name] {
            found = known
        } else {
            found = list.count
            index[name] = found
            list.append(name)
        }
        last = (name, found)
        return found
    }

    /// Header length, header (deflated in format 2: `SealedJSON`), records. An index keeps
    /// the `entries` it was given (its parts' records); every other kind counts its own.
    private func body(format: Int) -> [UInt8] {
        var header = self.header
        header.format = format
        header.folders = folders
        if format == ManifestSegment.sealedFormat {
            header.users = users
            header.groups = groups
        }
        if header.kind != .snapshotIndex { header.entries = count }
        let json = Array((try? ManifestSegment.headerEncoder.encode(header)) ?? Data())
        let headerBytes = format == ManifestSegment.sealedFormat ? SealedJSON.pack(json) : json
        var rest = ManifestByteWriter()
        rest.bytes.reserveCapacity(4 + headerBytes.count + body.bytes.count)
        rest.u32(UInt32(headerBytes.count))
        rest.append(headerBytes)
        rest.append(body.bytes)
        return rest.bytes
    }

    /// The format-1 object: magic, digest, header, records.
    package func finish() -> [UInt8] {
        let rest = body(format: ManifestSegment.formatVersion)
        return ManifestSegment.magic + SHA256.digest(rest) + rest
    }

    /// The format-2 plaintext (what is sealed, and what the daemon hands the command).
    package func plaintext() -> [UInt8] {
        body(format: ManifestSegment.sealedFormat)
    }

    /// The format-2 object, sealed under `key` for `objectKey`.
    package func sealed(key: MetadataKey, objectKey: String) -> [UInt8] {
        SealedObject.seal(plaintext(), key: key, objectKey: objectKey)
    }
}
