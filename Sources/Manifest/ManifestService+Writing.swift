import Bucket
import CLinux
import Foundation
import PhotolalaCore
import Queue

/// Writing: a log segment (PUT only if the number is free, then recorded), a snapshot
/// (its parts, then its index, then the objects it supersedes deleted), the device record.
extension ManifestService {
    func writeLog(_ records: [ManifestRecord], through: Int64, _ store: ManifestStore, _ keys: ManifestKeys) async throws {
        guard var current = ledger else { return }
        let seq = current.seq + 1
        var encoder = ManifestSegmentEncoder(header: ManifestHeader(kind: .log, device: keys.deviceId, seq: seq, createdAt: Timestamp.string(Date()),
                                                                    writer: current.writer, through: through))
        for record in records {
            if let entry = ManifestChanges.entry(record) { encoder.append(entry) }
        }
        let bytes = encoder.finish()
        // If-None-Match: a number is written once. A 412 means a write of ours got there
        // before its answer did (or before a kill -9): the next step takes it back.
        try await store.put(keys.log(seq), bytes, ifNoneMatch: true)
        let written = Date()
        current = try database.recordManifestSegment(seq: seq, records: records, through: through) { l in
            l.seq = seq
            l.logEntries += Int64(records.count)
            l.logSegments += 1
            l.lastChange = max(l.lastChange ?? 0, records.map(\.time).max() ?? 0)
            l.writtenAt = written.timeIntervalSince1970
        }
        ledger = current
        recordStale = true
        logger.debug("manifest segment written", metadata: ["seq": "\(seq)", "entries": "\(records.count)", "bytes": "\(bytes.count)"])
    }

    /// Writes a snapshot of the whole mirror as of the last segment, then deletes what it
    /// supersedes. Its parts go first and its index last: a reader only uses a snapshot
    /// whose index is there, and nothing older is deleted before that.
    func compact(_ store: ManifestStore, _ keys: ManifestKeys) async throws {
        guard var current = ledger else { return }
        let seq = current.seq
        guard seq > 0 else {
            needsSnapshot = false
            return
        }
        setState(.writing)
        var parts: [ManifestHeader.Part] = []
        var after: (path: String, seq: Int64, ord: Int64)?
        var total = 0
        var bytesWritten = 0
        while true {
            let number = parts.count + 1
            var encoder = ManifestSegmentEncoder(header: ManifestHeader(kind: .snapshot, device: keys.deviceId, seq: seq, part: number,
                                                                        createdAt: Timestamp.string(Date())))
            var last: StoredManifestRecord?
            let read = try database.manifestRecords(after: after, limit: options.policy.maxEntriesPerPart) { stored in
                if let entry = ManifestChanges.entry(stored.record) { encoder.append(entry) }
                last = stored
            }
            if read == 0 && !parts.isEmpty { break }
            let bytes = encoder.finish()
            try await store.put(keys.snapshotPart(seq, part: number), bytes)
            parts.append(.init(part: number, sha256: ManifestSegment.digestHex(of: bytes) ?? "", entries: encoder.count))
            total += encoder.count
            bytesWritten += bytes.count
            guard let last, read == options.policy.maxEntriesPerPart else { break }
            after = (last.record.path, last.seq, last.ord)
        }
        var index = ManifestHeader(kind: .snapshotIndex, device: keys.deviceId, seq: seq, createdAt: Timestamp.string(Date()), parts: parts)
        index.entries = total
        try await store.put(keys.snapshotIndex(seq), ManifestSegment(header: index, entries: []).encoded())
        current.snapshot = seq
        current.logEntries = 0
        current.logSegments = 0
        current.snapshotEntries = Int64(total)
        try database.saveManifestLedger(current)
        ledger = current
        needsSnapshot = false
        recordStale = true
        logger.info("manifest compacted into a snapshot", metadata: ["seq": "\(seq)", "entries": "\(total)", "parts": "\(parts.count)", "bytes": "\(bytesWritten)"])
        try await removeSuperseded(store, keys)
        // A compaction is a burst: what it freed goes back to the system now.
        photolala_trim_malloc()
    }

    /// Deletes what the newest complete snapshot makes useless: the logs it covers, older
    /// snapshots, unfinished ones older than it.
    func removeSuperseded(_ store: ManifestStore, _ keys: ManifestKeys) async throws {
        let chain = ManifestChain(keys: try await store.keys(under: keys.prefix), layout: keys)
        for key in chain.stale { try await store.delete(key) }
    }

    /// `device.json`: the name, the folders, the last backup and the totals.
    func writeRecord(_ store: ManifestStore, _ keys: ManifestKeys) async throws {
        guard let l = ledger else { return }
        let record = DeviceRecord(
            deviceId: keys.deviceId, name: options.deviceName, folders: options.folders,
            lastBackupAt: l.lastChange.map { Timestamp.string(Date(timeIntervalSince1970: Double($0) / 1000)) },
            files: l.files, bytes: l.bytes, logSeq: l.seq, snapshotSeq: l.snapshot, updatedAt: Timestamp.string(Date()),
            software: "photolalad \(PhotolalaVersion.current)")
        try await store.put(keys.record, record.encoded(), contentType: "application/json")
        recordStale = false
    }
}
