import Control
import RestoreWire

/// Reads the daemon's listing of the bucket (`md5 size storageClass` lines, then `end`)
/// fed in arbitrary pieces, keeping only the objects a restore wants; what it never sees
/// is missing from the bucket.
package struct ObjectListing: Sendable {
    package let wanted: Set<String>
    private var found: [String: ObjectStatus] = [:]
    private var partial: [UInt8] = []
    package private(set) var ended = false

    package init(wanted: Set<String>) {
        self.wanted = wanted
    }

    /// Listing costs a request per 1,000 objects of the bucket, HEADs one per object
    /// wanted: list when the restore wants at least a thousandth of the bucket.
    package static func worthListing(wanted: Int, bucketEstimate: Int64) -> Bool {
        Int64(wanted) * 1000 >= max(1, bucketEstimate)
    }

    package mutating func feed(_ bytes: UnsafeRawBufferPointer) throws {
        for b in bytes {
            if b == UInt8(ascii: "\n") {
                try line(partial)
                partial.removeAll(keepingCapacity: true)
            } else {
                partial.append(b)
                if partial.count > 4096 { throw Malformed() }
            }
        }
    }

    package struct Malformed: Error {}

    private mutating func line(_ bytes: [UInt8]) throws {
        let text = String(decoding: bytes, as: UTF8.self)
        if text == "end" {
            ended = true
            return
        }
        let fields = text.split(separator: " ")
        guard fields.count == 3, let size = Int64(fields[1]) else { throw Malformed() }
        let md5 = String(fields[0])
        guard wanted.contains(md5) else { return }
        let storageClass = String(fields[2])
        found[md5] = ObjectStatus(md5: md5, state: ArchiveClass.needsThaw(storageClass) ? .archived : .ready, size: size,
                                  storageClass: storageClass)
    }

    /// Every wanted object: as listed, or missing.
    package var statuses: [String: ObjectStatus] {
        var out = found
        for md5 in wanted where out[md5] == nil { out[md5] = ObjectStatus(md5: md5, state: .missing) }
        return out
    }
}
