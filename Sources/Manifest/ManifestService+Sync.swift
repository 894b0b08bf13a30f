import Foundation
import PhotolalaCore
import Queue

/// Comparing the bucket's manifest with the ledger, once per account and process start:
/// a segment written but not recorded (a kill -9 between the PUT and the commit) is taken
/// back; a mirror lost with a damaged database is rebuilt from the bucket; objects the
/// bucket lost are written again as a snapshot.
extension ManifestService {
    func sync(_ store: ManifestStore, _ keys: ManifestKeys) async throws {
        var current = try database.manifestLedger() ?? ManifestLedger(userId: nil, deviceId: nil)
        if current.userId != keys.userId || current.deviceId != keys.deviceId {
            // Another account or device than the mirror's (a first start, a new sign-in):
            // everything backed up is written again under this one.
            if current.userId != nil { logger.notice("the manifest starts over for this account and device") }
            current = ManifestLedger(userId: keys.userId, deviceId: keys.deviceId, writer: current.writer)
            try database.resetManifest(current)
        }
        ledger = current
        let chain = ManifestChain(keys: try await store.keys(under: keys.prefix), layout: keys)
        if let snapshot = chain.snapshot, snapshot > current.seq {
            // The bucket holds more than this database knows beyond what its log can tell
            // (the database was set aside as damaged and started over): rebuild the mirror.
            current = try await rebuild(from: snapshot, store, keys, writer: current.writer)
        }
        for seq in chain.logs where seq > current.seq {
            guard seq == current.seq + 1 else { break }
            let segment: ManifestSegment
            do {
                segment = try await store.segment(keys.log(seq)).segment
            } catch let error as ManifestReadError {
                // Never recorded here, so never counted on: delete it and what follows, and
                // write those numbers again from the changes still waiting.
                logger.warning("a manifest segment in the bucket cannot be used; writing it again: \(error)")
                for later in chain.listedLogs where later >= seq { try await store.delete(keys.log(later)) }
                break
            }
            current = try adopt(segment, seq: seq)
            logger.notice("took back a manifest segment written before a stop", metadata: ["seq": "\(seq)"])
        }
        let reach = max(chain.lastSeq, chain.snapshot ?? 0)
        if reach < current.seq || (chain.gapAt.map { $0 <= current.seq } ?? false) || (chain.snapshot ?? 0) < current.snapshot {
            logger.warning("the bucket lacks manifest segments this NAS wrote; writing a snapshot of the whole manifest again")
            needsSnapshot = true
        } else {
            for seq in chain.beyondGap where seq > current.seq { try await store.delete(keys.log(seq)) }
            for key in chain.stale { try await store.delete(key) }
        }
        ledger = current
        recordStale = true
    }

    /// Records a segment read back from the bucket as if just written. The changes it
    /// consumed are dropped only if this database wrote it.
    private func adopt(_ segment: ManifestSegment, seq: Int64) throws -> ManifestLedger {
        let records = segment.entries.compactMap(ManifestChanges.record)
        let mine = segment.header.writer == ledger?.writer
        let written = Timestamp.parse(segment.header.createdAt)?.timeIntervalSince1970
        let saved = try database.recordManifestSegment(seq: seq, records: records, through: mine ? segment.header.through : nil) { l in
            l.seq = seq
            l.logEntries += Int64(records.count)
            l.logSegments += 1
            l.lastChange = max(l.lastChange ?? 0, records.map(\.time).max() ?? 0)
            l.writtenAt = written ?? l.writtenAt
        }
        ledger = saved
        return saved
    }

    /// A new mirror from the snapshot `seq`; every backed-up file stays a change, which
    /// then finds its entry already there and writes nothing.
    private func rebuild(from seq: Int64, _ store: ManifestStore, _ keys: ManifestKeys, writer: String) async throws -> ManifestLedger {
        logger.notice("rebuilding the manifest mirror from the bucket", metadata: ["snapshot": "\(seq)"])
        try database.resetManifest(ManifestLedger(userId: keys.userId, deviceId: keys.deviceId, writer: writer))
        let index = try await store.segment(keys.snapshotIndex(seq)).segment
        var ord: Int64 = 0
        var saved = try database.manifestLedger()
        for part in index.header.parts ?? [] {
            let segment = try await store.segment(keys.snapshotPart(seq, part: part.part), digest: part.sha256).segment
            let records = segment.entries.compactMap(ManifestChanges.record)
            saved = try database.recordManifestSegment(seq: seq, records: records, through: nil, ordBase: ord) { l in
                l.seq = seq
                l.snapshot = seq
                l.snapshotEntries += Int64(records.count)
                l.lastChange = max(l.lastChange ?? 0, records.map(\.time).max() ?? 0)
            }
            ord += Int64(records.count)
        }
        let result = saved ?? ManifestLedger(userId: keys.userId, deviceId: keys.deviceId, writer: writer)
        ledger = result
        return result
    }
}
