#if canImport(Glibc)
import Glibc
#endif

/// The `struct inotify_event` records of one read, in order: the watch, the mask, the
/// rename cookie and the name's bytes as the kernel wrote them (NUL-padded). A name with
/// no NUL in its padding is malformed.
struct InotifyRecords: Sequence {
    struct Record {
        var wd: Int32
        var mask: UInt32
        var cookie: UInt32
        /// The name, NUL-terminated within its padding; nil when the event has none.
        var name: UnsafePointer<CChar>?
        /// A name the kernel sent but that could not be read.
        var malformedName: Bool
    }

    let base: UnsafeMutableRawPointer
    let count: Int

    func makeIterator() -> AnyIterator<Record> {
        var offset = 0
        return AnyIterator {
            guard offset + 16 <= count else { return nil }
            let length = Int(base.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            var record = Record(wd: base.loadUnaligned(fromByteOffset: offset, as: Int32.self),
                                mask: base.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
                                cookie: base.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self),
                                name: nil, malformedName: false)
            if length > 0, offset + 16 + length <= count {
                let name = UnsafePointer((base + offset + 16).assumingMemoryBound(to: CChar.self))
                if strnlen(name, length) < length { record.name = name } else { record.malformedName = true }
            }
            offset += 16 + length
            return record
        }
    }
}
