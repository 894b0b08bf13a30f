import ManifestFormat
import PhotolalaCore
import Queue
import Vault

/// The manifest's mirror in the queue database made again from a snapshot in the bucket
/// (the sync finds the bucket ahead of the ledger). Every backed-up file stays a change,
/// which then finds its record already there and writes nothing.
struct ManifestRebuild {
    let database: QueueDatabase
    let store: ManifestStore
    let keys: ManifestKeys
    let key: MetadataKey

    /// The ledger of the new mirror of snapshot `seq`, saved; `counter`: the device
    /// record's counter the ledger held, kept.
    func mirror(from seq: Int64, writer: String, counter: Int64?) async throws -> ManifestLedger {
        try await database.resetManifest(ManifestLedger(userId: keys.userId, deviceId: keys.deviceId, writer: writer))
        let index = try await store.sealedSegment(keys.snapshotIndex(seq), key: key).segment
        guard index.header.kind == .snapshotIndex, index.header.seq == seq, let prev = index.header.prev else {
            throw ManifestReadError.damaged(keys.snapshotIndex(seq), "it is not the index of snapshot \(seq)")
        }
        var ord: Int64 = 0
        var saved = try await database.manifestLedger()
        for part in index.header.parts ?? [] {
            let segment = try await store.sealedSegment(keys.snapshotPart(seq, part: part.part), key: key, digest: part.sha256).segment
            let records = segment.entries.compactMap(ManifestChanges.record)
            saved = try await database.recordManifestSegment(seq: seq, records: records, through: nil, ordBase: ord) { l in
                l.seq = seq
                l.snapshot = seq
                l.snapshotEntries += Int64(records.count)
                l.lastChange = max(l.lastChange ?? 0, records.map(\.time).max() ?? 0)
            }
            ord += Int64(records.count)
        }
        var result = saved ?? ManifestLedger(userId: keys.userId, deviceId: keys.deviceId, writer: writer)
        result.headSHA = prev
        result.counter = counter
        try await database.saveManifestLedger(result)
        return result
    }
}
