import Bucket
import ManifestFormat
import NIOCore
import PhotolalaCore
import Synchronization
import Vault

/// What the key service asks the bucket, through its own session: the key object
/// `metadata/{userId}/keys/account-key`, writing it (conditionally, always), and whether
/// anything else under the user's metadata says the account has a key (privacy.md).
struct KeyBucket: Sendable {
    /// One small request at a time; transient failures tried twice in place, then the
    /// service's own backoff.
    static let budget = BucketBudget(transientRetries: 2, backoff: Backoff(base: 0.5, cap: 2, jitter: .full, floor: 0.2),
                                     repeatsUnreadableAnswers: false)

    let session: BucketSession

    static func prefix(_ uid: String) -> String { "metadata/\(uid)/" }

    /// The key object's bytes and ETag; nil when there is none.
    func keyObject(_ uid: String) async throws(S3Error) -> (bytes: [UInt8], etag: String)? {
        try await session.perform(under: Self.prefix(uid), budget: Self.budget) { bucket throws(S3Error) in
            try await bucket.getObjectIfPresent(key: KeyObject.objectKey(userId: uid))
        }
    }

    /// Writes the key object: over the one whose ETag is `ifMatch`, or (nil) only where
    /// there is none (`If-None-Match: *`); answers its new ETag. Never unconditionally: another NAS may have
    /// written meanwhile, and its key must not be lost.
    ///
    /// Ceph Pacific answers 412 to the quoted ETag S3 itself returns although it holds, and
    /// honours the bare one (docs/decisions.md, "What Pacific does differently"). A 412 whose
    /// object still has the ETag read is the store, not a lost race: asked again, bare, so a
    /// writer in between still wins. Only here: the catalog takes such a 412 its own way.
    @discardableResult
    func putKeyObject(_ object: [UInt8], uid: String, ifMatch: String?) async throws(S3Error) -> String {
        let key = KeyObject.objectKey(userId: uid)
        return try await session.perform(under: Self.prefix(uid), budget: Self.budget) { bucket throws(S3Error) in
            do throws(S3Error) {
                return try await bucket.putObject(key: key, bytes: object, contentType: "application/octet-stream",
                                                  ifMatch: ifMatch, ifNoneMatch: ifMatch == nil)
            } catch {
                guard error.kind == .preconditionFailed, let ifMatch, let now = try? await bucket.headObject(key: key),
                      ETag.same(now.etag, ifMatch) else { throw error }
                return try await bucket.putObject(key: key, bytes: object, contentType: "application/octet-stream",
                                                  ifMatch: ifMatch, bareIfMatch: true)
            }
        }
    }

    /// The key object's ETag, nil when there is none: a cheap look before the manifest
    /// writes (a changed one is looked at whole).
    func keyObjectETag(_ uid: String) async throws(S3Error) -> String? {
        try await session.perform(under: Self.prefix(uid), budget: Self.budget) { bucket throws(S3Error) in
            try await bucket.headObject(key: KeyObject.objectKey(userId: uid))?.etag
        }
    }

    /// One object's bytes, nil when there is none.
    func object(_ key: String, uid: String) async throws(S3Error) -> [UInt8]? {
        try await session.perform(under: Self.prefix(uid), budget: Self.budget) { bucket throws(S3Error) in
            try await bucket.getObjectIfPresent(key: key)?.bytes
        }
    }

    /// Whether the device record of `device` is sealed and opens under `key` (absent: none there).
    func ownRecord(_ uid: String, device: String, key: AccountKey) async throws(S3Error) -> KeyLifecycle.OwnRecord {
        let recordKey = ManifestKeys(userId: uid, deviceId: device).record
        guard let bytes = try await object(recordKey, uid: uid), DeviceRecordBytes.isSealed(bytes) else { return .absent }
        return (try? SealedObject.open(bytes, key: key.metadataKey, objectKey: recordKey)) != nil ? .opens : .doesNotOpen
    }

    /// Every key under `prefix` (inside the user's metadata).
    func keys(under prefix: String, uid: String) async throws(S3Error) -> [String] {
        var keys: [String] = []
        var token: String?
        repeat {
            let page = try await session.perform(under: Self.prefix(uid), budget: Self.budget) { [token] bucket throws(S3Error) in
                try await bucket.listObjects(prefix: prefix, continuationToken: token, maxKeys: 1000)
            }
            keys += page.objects.map(\.key)
            token = page.nextContinuationToken
        } while token != nil
        return keys
    }

    /// Every device record of the account, as the bucket holds it.
    func deviceRecords(_ uid: String) async throws(S3Error) -> [KeyLifecycle.Record] {
        var out: [KeyLifecycle.Record] = []
        for key in try await keys(under: ManifestKeys.devicesPrefix(uid), uid: uid) {
            guard ManifestKeys.deviceOf(key: key, userId: uid)?.isRecord == true, let bytes = try await object(key, uid: uid) else { continue }
            out.append(KeyLifecycle.Record(objectKey: key, bytes: bytes))
        }
        return out
    }

    /// Writes an object of the account's metadata (the re-seal: sealed bytes only).
    func put(_ key: String, _ bytes: [UInt8], uid: String) async throws(S3Error) {
        _ = try await session.perform(under: Self.prefix(uid), budget: Self.budget) { bucket throws(S3Error) in
            try await bucket.putObject(key: key, bytes: bytes, contentType: "application/octet-stream")
        }
    }

    /// Whether anything besides the key object says the account has a key (privacy.md):
    /// another object under `keys/`, or a format-2 object under the user's metadata (a
    /// sealed segment `….pls`, or a `device.json` that starts with the sealed magic).
    func hasKeyMaterial(_ uid: String) async throws(S3Error) -> Bool {
        let prefix = Self.prefix(uid)
        let keyObject = KeyObject.objectKey(userId: uid)
        var token: String?
        repeat {
            let page = try await session.perform(under: prefix, budget: Self.budget) { [token] bucket throws(S3Error) in
                try await bucket.listObjects(prefix: prefix, continuationToken: token, maxKeys: 1000)
            }
            for object in page.objects where object.key != keyObject {
                if object.key.hasPrefix(prefix + "keys/") || object.key.hasSuffix(".pls") { return true }
                if object.key.hasSuffix("/device.json"), object.size >= 8, try await startsSealed(object.key, prefix: prefix) {
                    return true
                }
            }
            token = page.nextContinuationToken
        } while token != nil
        return false
    }

    /// The first 8 bytes of `key`, asked with a ranged GET.
    private func startsSealed(_ key: String, prefix: String) async throws(S3Error) -> Bool {
        let head = HeadBytes()
        do throws(S3Error) {
            _ = try await session.perform(under: prefix, budget: Self.budget) { bucket throws(S3Error) in
                head.reset()
                return try await bucket.getObject(key: key, range: 0...7, expectedBytes: 8) { buffer in head.append(buffer) }
            }
        } catch {
            // Gone since the listing: nothing to say about the account.
            if error.kind == .notFound { return false }
            throw error
        }
        return head.bytes.starts(with: SealedObject.magic) || head.bytes.starts(with: SealedRecord.magic)
    }
}

/// The re-seal's reads and writes, through the key service's session.
struct ResealBucket: ResealStore {
    let bucket: KeyBucket
    let uid: String

    func keys(under prefix: String) async throws -> [String] { try await bucket.keys(under: prefix, uid: uid) }
    func bytes(_ key: String) async throws -> [UInt8]? { try await bucket.object(key, uid: uid) }
    func put(_ key: String, _ bytes: [UInt8]) async throws { try await bucket.put(key, bytes, uid: uid) }
}

/// The first bytes of a ranged GET, gathered from the transport's buffers.
private final class HeadBytes: Sendable {
    private let state = Mutex<[UInt8]>([])

    var bytes: [UInt8] { state.withLock { $0 } }

    func reset() { state.withLock { $0 = [] } }

    func append(_ buffer: ByteBuffer) {
        state.withLock { bytes in
            if bytes.count < 8 { bytes += buffer.getBytes(at: buffer.readerIndex, length: min(8 - bytes.count, buffer.readableBytes)) ?? [] }
        }
    }
}
