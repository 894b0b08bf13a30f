import Foundation
import PhotolalaCore
import Vault

/// Where a manifest's objects are read from: a listing and the objects' bytes, nothing
/// else. The manifest stage and restore each answer it from their bucket; the reading and
/// every check stay here, with the format.
package protocol ManifestObjects: Sendable {
    /// One page of the keys under `prefix` from `token` (nil: the first), and the token of
    /// the next page (nil: that was the last).
    func keys(under prefix: String, from token: String?) async throws -> (keys: [String], next: String?)
    /// The object's bytes, nil when there is no such key.
    func bytes(_ key: String) async throws -> [UInt8]?
    /// One page of the objects under `prefix`, with their sizes and times where the store
    /// says (the freshness checks hold a sealed time against `LastModified`).
    func listing(under prefix: String, from token: String?) async throws -> (objects: [ListedObject], next: String?)
}

extension ManifestObjects {
    /// Without times: what `keys` says.
    package func listing(under prefix: String, from token: String?) async throws -> (objects: [ListedObject], next: String?) {
        let page = try await keys(under: prefix, from: token)
        return (page.keys.map { ListedObject(key: $0, size: 0, etag: "") }, page.next)
    }

    /// Every object under `prefix`, page after page.
    package func listing(under prefix: String) async throws -> [ListedObject] {
        var out: [ListedObject] = []
        var token: String?
        repeat {
            let page = try await listing(under: prefix, from: token)
            out += page.objects
            token = page.next
        } while token != nil
        return out
    }
}

extension ManifestObjects {
    /// Every key under `prefix`, page after page.
    package func keys(under prefix: String) async throws -> [String] {
        var keys: [String] = []
        var token: String?
        repeat {
            let page = try await self.keys(under: prefix, from: token)
            keys += page.keys
            token = page.next
        } while token != nil
        return keys
    }

    /// A segment, read and checked; `digest` (hex) must match when given (a snapshot part
    /// against its index).
    package func segment(_ key: String, digest: String? = nil) async throws -> (segment: ManifestSegment, bytes: [UInt8]) {
        guard let bytes = try await bytes(key) else { throw ManifestReadError.missing(key) }
        if let digest, ManifestSegment.digestHex(of: bytes) != digest { throw ManifestReadError.damaged(key, "it is not the part its index names") }
        do {
            return (try ManifestSegment.decode(bytes), bytes)
        } catch {
            throw ManifestReadError.damaged(key, error.description)
        }
    }
}

extension ManifestObjects {
    /// A format-2 segment, opened as its key under `key` and read; `digest` (hex SHA-256
    /// of the sealed bytes) must match when given (a snapshot part against its index).
    package func sealedSegment(_ objectKey: String, key: MetadataKey, digest: String? = nil) async throws -> (segment: ManifestSegment, sealed: [UInt8], plaintext: [UInt8]) {
        guard let bytes = try await bytes(objectKey) else { throw ManifestReadError.missing(objectKey) }
        let named = digest.map { ManifestSegment.sealedDigestHex(of: bytes) == $0 } ?? true
        do {
            let (segment, plaintext) = try ManifestSegment.open(bytes, key: key, objectKey: objectKey)
            // A part sealed again under a new account key still answers to its old bytes.
            guard named || (digest != nil && segment.header.resealedFrom == digest) else {
                throw ManifestReadError.damaged(objectKey, "it is not the part its index names")
            }
            return (segment, bytes, plaintext)
        } catch let error as ManifestReadError {
            throw error
        } catch {
            guard named else { throw ManifestReadError.damaged(objectKey, "it is not the part its index names") }
            throw ManifestReadError.damaged(objectKey, "\(error)")
        }
    }
}

/// Why a manifest could not be read as the listing promised.
package enum ManifestReadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Listed but gone when fetched: compacted away meanwhile; read again.
    case missing(String)
    case damaged(String, String)

    package var description: String {
        switch self {
        case .missing(let key): "\(key) went away while it was being read (the manifest was being compacted); read it again"
        case let .damaged(key, why): "\(key) cannot be trusted: \(why)"
        }
    }
}

/// Reads a device's manifest from the bucket in replay order — the newest complete
/// snapshot's parts, each checked against its index, then the log segments after it —
/// and hands over every segment checked, with its bytes (format 1: the object; format 2:
/// its plaintext, opened). What it cannot use it reports.
///
/// Format 2 is also checked for freshness (privacy.md): every log segment must name the
/// SHA-256 of the one before it, and the chain must reach the head the sealed device
/// record names — or the newer one this NAS remembers, so an older record coming back is
/// caught. A manifest that stops short is reported with the time before which it is
/// still whole (`wholeBefore`).
package struct ManifestReader: Sendable {
    package struct Report: Codable, Sendable, Equatable {
        package var segments: Int = 0
        package var entries: Int = 0
        /// The last log segment replayed (0: none).
        package var lastSeq: Int64 = 0
        /// Everything the reader could not use, in words; empty when the manifest was read whole.
        package var problems: [String] = []
        /// Read to its end.
        package var complete = true
        /// An object went away while it was read (compaction): read again.
        package var retry = false
        /// 1 or 2.
        package var format: Int = 1
        /// Format 2, when the manifest is not proven whole: it holds every change recorded
        /// before this time (ms since the epoch), and a restore as of an earlier time is
        /// whole. nil: whole.
        package var wholeBefore: Int64?
        /// Format 2, read whole: the head it reached and the record's counter (what the
        /// reader remembers).
        package var head: RememberedHead?
        /// Format 2: the device record's sealed write time lies well before its object's
        /// `LastModified` while its segments' do not: an older record was put back (privacy.md
        /// "Freshness without memory").
        package var replayed = false
        /// Every object's time moved alike (the bucket was copied whole): not refused, but
        /// the restore asks for `--as-of` or a confirmation.
        package var copied = false
        /// Below what another device's record vouches for (the newest segments gone, or an
        /// older record put back).
        package var belowFloor = false
        package init() {}
    }

    /// What a fresh NAS holds the manifest against, besides its own memory (privacy.md
    /// "Freshness without memory").
    package struct Freshness: Sendable, Equatable {
        /// The newest record counter and segment any other device's record vouches for,
        /// and that device.
        package var floor: SeenHead?
        package var floorBy: String?
        /// How much later than its sealed write time an object may have been stored: S3
        /// refuses a signature more than 15 minutes off, and a record is a small PUT.
        package var tolerance: TimeInterval = 900
        /// `--as-of` or a confirmation accepted a bucket whose objects all moved alike.
        package var acceptCopied = false

        package init(floor: SeenHead? = nil, floorBy: String? = nil, acceptCopied: Bool = false) {
            self.floor = floor
            self.floorBy = floorBy
            self.acceptCopied = acceptCopied
        }
    }

    package let store: any ManifestObjects
    package let keys: ManifestKeys
    /// Format 2: the metadata key; nil reads format 1.
    package let key: MetadataKey?
    /// Format 2: the newest head this NAS saw of the device.
    package let remembered: RememberedHead?
    package let freshness: Freshness

    /// A format-1 (plaintext) reader.
    package init(store: any ManifestObjects, keys: ManifestKeys) {
        self.store = store
        self.keys = keys.isPlaintext ? keys : keys.plaintext
        key = nil
        remembered = nil
        freshness = Freshness()
    }

    /// A format-2 reader.
    package init(store: any ManifestObjects, keys: ManifestKeys, key: MetadataKey, remembered: RememberedHead?,
                 freshness: Freshness = Freshness()) {
        self.store = store
        self.keys = keys
        self.key = key
        self.remembered = remembered
        self.freshness = freshness
    }

    package func read(_ each: (ManifestSegment, [UInt8]) async throws -> Void) async throws -> Report {
        if let key { return try await readSealed(key: key, each) }
        return try await readPlaintext(each)
    }

    private func readPlaintext(_ each: (ManifestSegment, [UInt8]) async throws -> Void) async throws -> Report {
        var report = Report()
        let chain = ManifestChain(keys: try await store.keys(under: keys.prefix), layout: keys)
        func deliver(_ segment: ManifestSegment, _ bytes: [UInt8]) async throws {
            try await each(segment, bytes)
            report.segments += 1
            report.entries += segment.entries.count
        }
        do {
            if let seq = chain.snapshot {
                let (index, indexBytes) = try await store.segment(keys.snapshotIndex(seq))
                guard index.header.kind == .snapshotIndex, index.header.seq == seq, let parts = index.header.parts else {
                    throw ManifestReadError.damaged(keys.snapshotIndex(seq), "it is not the index of snapshot \(seq)")
                }
                try await each(index, indexBytes)
                for part in parts {
                    let key = keys.snapshotPart(seq, part: part.part)
                    let (segment, bytes) = try await store.segment(key, digest: part.sha256)
                    guard segment.header.kind == .snapshot, segment.header.seq == seq else {
                        throw ManifestReadError.damaged(key, "it is not a part of snapshot \(seq)")
                    }
                    try await deliver(segment, bytes)
                }
                report.lastSeq = seq
            }
            for seq in chain.logs {
                let key = keys.log(seq)
                let (segment, bytes) = try await store.segment(key)
                guard segment.header.kind == .log, segment.header.seq == seq else {
                    throw ManifestReadError.damaged(key, "it is not log segment \(seq)")
                }
                try await deliver(segment, bytes)
                report.lastSeq = seq
            }
            if let gap = chain.gapAt {
                report.problems.append("log segment \(gap) of the manifest is missing: it was read up to segment \(gap - 1), later changes are not in this restore")
                report.complete = false
            }
        } catch ManifestReadError.missing(let key) {
            report.problems.append("\(key) went away while it was read (the manifest was being compacted)")
            report.complete = false
            report.retry = true
        } catch let ManifestReadError.damaged(key, why) {
            report.problems.append("\(key) cannot be trusted (\(why)): the manifest was read up to segment \(report.lastSeq), later changes are not in this restore")
            report.complete = false
        }
        return report
    }

    private func readSealed(key: MetadataKey, _ each: (ManifestSegment, [UInt8]) async throws -> Void) async throws -> Report {
        var report = Report()
        report.format = 2
        let listing = try await store.listing(under: keys.prefix)
        let stored = Dictionary(listing.map { ($0.key, $0.lastModified) }, uniquingKeysWith: { a, _ in a })
        let chain = ManifestChain(keys: listing.map(\.key), layout: keys)
        // What the chain must reach: the sealed record's head, or the newer one remembered.
        var expected: RememberedHead?
        var recordTrusted = false
        var opened: DeviceRecord?
        if let bytes = try await store.bytes(keys.record) {
            do {
                let record = try DeviceRecord.open(bytes, key: key, objectKey: keys.record)
                if let counter = record.counter, let head = record.head, record.deviceId == keys.deviceId {
                    expected = RememberedHead(counter: counter, head: head)
                    recordTrusted = true
                    opened = record
                } else {
                    report.problems.append("\(keys.record) names another device: it cannot say how far the manifest goes")
                }
            } catch {
                report.problems.append("\(keys.record) cannot be trusted (\(error)): nothing proves how far the manifest goes")
            }
        } else {
            report.problems.append("\(keys.record) is missing: nothing proves how far the manifest goes")
        }
        if let remembered {
            if let e = expected, remembered.counter > e.counter || remembered.head.seq > e.head.seq {
                report.problems.append("\(keys.record) is older than one this NAS read before (record \(e.counter), segment \(e.head.seq); this NAS saw record \(remembered.counter), segment \(remembered.head.seq)): the bucket was rolled back")
                expected = remembered
            } else if expected == nil {
                expected = remembered
            }
        }
        var newest: Int64?
        var lastSHA = ManifestHeader.noPrevious
        /// What the last segment's bytes were before a new account key sealed it again.
        var lastFormer: String?
        /// The last chained object read: its key and sealed write time.
        var last: (key: String, createdAt: String)?
        func deliver(_ segment: ManifestSegment, _ plaintext: [UInt8]) async throws {
            try await each(segment, plaintext)
            report.segments += 1
            report.entries += segment.entries.count
            for e in segment.entries { newest = max(newest ?? e.time, e.time) }
        }
        do {
            if let seq = chain.snapshot {
                let indexKey = keys.snapshotIndex(seq)
                let (index, _, indexPlain) = try await store.sealedSegment(indexKey, key: key)
                guard index.header.kind == .snapshotIndex, index.header.seq == seq, let parts = index.header.parts,
                      let prev = index.header.prev else {
                    throw ManifestReadError.damaged(indexKey, "it is not the index of snapshot \(seq)")
                }
                try await each(index, indexPlain)
                last = (indexKey, index.header.createdAt)
                for (i, part) in parts.enumerated() {
                    let partKey = keys.snapshotPart(seq, part: part.part)
                    let (segment, _, plaintext) = try await store.sealedSegment(partKey, key: key, digest: part.sha256)
                    guard part.part == i + 1, segment.header.kind == .snapshot, segment.header.seq == seq, segment.header.part == part.part else {
                        throw ManifestReadError.damaged(partKey, "it is not part \(part.part) of snapshot \(seq)")
                    }
                    try await deliver(segment, plaintext)
                }
                report.lastSeq = seq
                lastSHA = prev
            }
            for seq in chain.logs {
                let logKey = keys.log(seq)
                let (segment, sealed, plaintext) = try await store.sealedSegment(logKey, key: key)
                guard segment.header.kind == .log, segment.header.seq == seq else {
                    throw ManifestReadError.damaged(logKey, "it is not log segment \(seq)")
                }
                guard segment.header.prev == lastSHA || (lastFormer != nil && segment.header.prev == lastFormer) else {
                    throw ManifestReadError.damaged(logKey, "it does not follow segment \(seq - 1) (an older or another copy of a segment)")
                }
                try await deliver(segment, plaintext)
                report.lastSeq = seq
                lastSHA = ManifestSegment.sealedDigestHex(of: sealed)
                lastFormer = segment.header.resealedFrom
                last = (logKey, segment.header.createdAt)
            }
            if let gap = chain.gapAt {
                report.problems.append("log segment \(gap) of the manifest is missing: it was read up to segment \(gap - 1), later changes are not in this restore")
                report.complete = false
            }
        } catch ManifestReadError.missing(let missing) {
            report.problems.append("\(missing) went away while it was read (the manifest was being compacted)")
            report.complete = false
            report.retry = true
        } catch let ManifestReadError.damaged(damaged, why) {
            report.problems.append("\(damaged) cannot be trusted (\(why)): the manifest was read up to segment \(report.lastSeq), later changes are not in this restore")
            report.complete = false
        }
        if report.complete, let e = expected {
            if report.lastSeq < e.head.seq {
                report.problems.append("the newest segments are missing: the device's record names segment \(e.head.seq), the bucket holds the manifest up to segment \(report.lastSeq)")
                report.complete = false
            } else if report.lastSeq == e.head.seq && lastSHA != e.head.sha256 && lastFormer != e.head.sha256 {
                report.problems.append("segment \(e.head.seq) is not the one the device's record names (an older or another copy)")
                report.complete = false
            }
        }
        if !recordTrusted && expected == nil { report.complete = false }
        // Freshness without memory: a record put back is a new PUT of old bytes; the
        // newest head another device vouches for is the floor.
        if let record = opened, let storedAt = stored[keys.record] ?? nil, let written = Timestamp.parse(record.updatedAt),
           storedAt.timeIntervalSince(written) > freshness.tolerance {
            let moved = last.flatMap { l in (stored[l.key] ?? nil).flatMap { at in Timestamp.parse(l.createdAt).map { at.timeIntervalSince($0) } } }
            if let moved, moved > freshness.tolerance {
                report.copied = true
                if !freshness.acceptCopied {
                    report.problems.append("every object of device \(keys.deviceId) was stored well after it was written (its record written "
                        + "\(record.updatedAt), stored \(Timestamp.string(storedAt))): the bucket was copied whole, or everything was put back; "
                        + "restore with --as-of, or confirm that this bucket is a copy")
                    report.complete = false
                }
            } else {
                report.replayed = true
                report.problems.append("the record of device \(keys.deviceId) was written \(record.updatedAt) but stored "
                    + "\(Timestamp.string(storedAt)): an older record was put back (a replay); changes after \(record.updatedAt) may be missing")
                report.complete = false
                if let at = Timestamp.parse(record.updatedAt) {
                    newest = min(newest ?? Int64.max, Int64((at.timeIntervalSince1970 * 1000).rounded(.down)))
                }
            }
        }
        if let floor = freshness.floor {
            let counter = opened?.counter ?? 0
            if report.lastSeq < floor.seq || counter < floor.counter {
                report.belowFloor = true
                report.problems.append("device \(freshness.floorBy ?? "another device") saw the manifest of device \(keys.deviceId) up to "
                    + "segment \(floor.seq) (record \(floor.counter)); the bucket holds it up to segment \(report.lastSeq) (record \(counter)): "
                    + "the newest segments were deleted or an older record was put back")
                report.complete = false
            }
        }
        if report.complete, let e = expected {
            report.head = RememberedHead(counter: e.counter, head: ManifestHead(seq: report.lastSeq, sha256: lastSHA))
        } else {
            report.complete = false
            report.wholeBefore = newest ?? Int64.min
        }
        return report
    }
}
