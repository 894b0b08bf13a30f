import PhotolalaCore
import Synchronization

/// SHA-256s taken while hashing, for uploads that must sign their payload.
///
/// Over plain HTTP (an S3-compatible endpoint on the LAN, the loopback test stack) SigV4
/// signs the body's SHA-256, which costs a whole extra read of every photo right before
/// its PUT. When the uploader says signed payloads are wanted, the hasher computes the
/// SHA-256 in the same pass as the MD5 (one read, both digests) and leaves it here; the
/// upload takes it instead of reading the file again. Over HTTPS (AWS itself) nothing is
/// wanted and nothing is computed: `UNSIGNED-PAYLOAD` with Content-MD5 is enough.
///
/// Only a cache: bounded, lost at restart, and an entry is used only for the exact file
/// identity (device, inode, size, mtime) it was computed for; a miss means the upload
/// reads the file as it always did.
package final class PayloadDigests: Sendable {
    private struct Entry: Sendable {
        var identity: FileIdentity
        var sha256: String
    }

    private struct Store: ~Copyable {
        var entries: [String: Entry] = [:]
        /// Insertion order of keys, for evicting the oldest; may hold keys already taken.
        var order: [String] = []
        var head = 0
    }

    private let wantedFlag = Atomic<Bool>(false)
    private let store = Mutex(Store())
    /// ~250 bytes an entry: about 1 MB at most, and more than a hashing lead of a few
    /// thousand photos ahead of the uploads is not worth keeping (those are read again).
    package let capacity: Int

    package init(capacity: Int = 4096) {
        self.capacity = max(1, capacity)
    }

    /// Whether the hasher should compute SHA-256s (the uploader's S3 endpoint signs payloads).
    package var wanted: Bool { wantedFlag.load(ordering: .relaxed) }

    package func setWanted(_ wanted: Bool) {
        wantedFlag.store(wanted, ordering: .relaxed)
        if !wanted { store.withLock { $0 = Store() } }
    }

    package var count: Int { store.withLock { $0.entries.count } }

    package func store(md5: String, identity: FileIdentity, sha256: String) {
        store.withLock { s in
            if s.entries.updateValue(Entry(identity: identity, sha256: sha256), forKey: md5) == nil {
                s.order.append(md5)
            }
            while s.entries.count > capacity, s.head < s.order.count {
                s.entries.removeValue(forKey: s.order[s.head])
                s.head += 1
            }
            if s.head > 1024 && s.head * 2 > s.order.count {
                s.order.removeFirst(s.head)
                s.head = 0
            }
        }
    }

    /// The SHA-256 of the file with this MD5 if it was computed for exactly this identity;
    /// the entry is spent either way (an object is uploaded once).
    package func take(md5: String, identity: FileIdentity) -> String? {
        store.withLock { s in
            guard let entry = s.entries.removeValue(forKey: md5) else { return nil }
            return entry.identity == identity ? entry.sha256 : nil
        }
    }
}
