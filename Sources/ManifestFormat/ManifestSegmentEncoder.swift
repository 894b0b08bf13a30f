import Digests
import Foundation
import PhotolalaCore

/// Builds a segment's bytes one record at a time, so a snapshot part is encoded while its
/// records are read from the queue, never held as a list: only the body's bytes (under a
/// megabyte a part) stay in memory. The header's folders are collected as records name them.
package struct ManifestSegmentEncoder {
    private var header: ManifestHeader
    private var folderIndex = ExactKeyed<Int>()
    private var folders: [String] = []
    private var body = ManifestByteWriter()
    private var previousPath: [UInt8] = []
    private var previousTime: Int64 = 0
    package private(set) var count = 0

    package init(header: ManifestHeader) {
        self.header = header
    }

    package mutating func append(_ entry: ManifestEntry) {
        let folder: Int
        if let known = folderIndex[entry.folder] {
            folder = known
        } else {
            folder = folders.count
            folderIndex[entry.folder] = folder
            folders.append(entry.folder)
        }
        ManifestSegment.encode(entry, folder: folder, previousPath: previousPath, previousTime: previousTime, into: &body)
        previousPath = entry.path
        previousTime = entry.time
        count += 1
    }

    /// The object: magic, digest, header, records. An index keeps the `entries` it was
    /// given (its parts' records); every other kind counts its own.
    package func finish() -> [UInt8] {
        var header = self.header
        header.folders = folders
        if header.kind != .snapshotIndex { header.entries = count }
        let headerBytes = Array((try? ManifestSegment.headerEncoder.encode(header)) ?? Data())
        var rest = ManifestByteWriter()
        rest.bytes.reserveCapacity(4 + headerBytes.count + body.bytes.count)
        rest.u32(UInt32(headerBytes.count))
        rest.append(headerBytes)
        rest.append(body.bytes)
        return ManifestSegment.magic + SHA256.digest(rest.bytes) + rest.bytes
    }
}
