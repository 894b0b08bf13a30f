import Bucket
import CLinux
import Foundation
import Logging
import ManifestFormat
import PhotolalaCore
import Queue
import ServiceLifecycle
import Vault

/// The manifest stage: takes the paths whose backed-up state changed (`manifest_change`,
/// filled by the queue's triggers) and appends them to this NAS's manifest in the bucket
/// as self-checking log segments, compacted now and then into a snapshot (docs/manifest.md).
/// A segment is recorded in the queue only after the bucket took it, in one transaction
/// with the changes it consumed, so a kill -9 loses nothing and at worst leaves one
/// segment written but unrecorded, which the next start finds and takes back.
///
/// Woken by the queue's `uploaded` signal and whatever else the daemon passes (the
/// account's changes); it also looks every `pollInterval` for changes nothing signals
/// (files gone or moved).
package actor ManifestService: Service, Stage {
    /// The queue, clock, log, status feed and audit trail (`Stage` reads them through it).
    package nonisolated let context: StageContext
    private let session: BucketSession
    private let keySource: any MetadataKeySource
    private let loop: StageLoop
    private var options: Options
    private var ledger: ManifestLedger?
    /// Whether the bucket's manifest was compared with the ledger since the account (or
    /// the process) started.
    private var synced = false
    /// The bucket lost objects the ledger records: write a snapshot from the mirror.
    private var needsSnapshot = false
    /// The device record in the bucket no longer says what the ledger does.
    private var recordStale = true
    /// This device's objects of the plaintext format 1 still in the bucket (found by the
    /// sync): deleted once the sealed manifest and record stand.
    private var plaintextLeft: [String] = []
    private var waitingSince: Date?
    private var retry: Backoff
    private var state: DaemonStatus.Manifest.State = .off
    private var lastError: String?
    private var names = OwnerNames()
    /// Devices whose manifest was refused (this NAS's own, here), shown in status.
    private let alarms: ManifestAlarms?
    /// The account key of the step under way.
    private var accountKey: AccountKey?
    /// When the other devices' records were last read for what this NAS vouches for.
    private var vouchedAt: Date?
    /// When this NAS's own manifest in the bucket is looked at again (a downgrade, an older
    /// record put back); nil: at the next step that has the key.
    private var nextOwnCheck: Date?
    /// The key was confirmed current in this step (one HEAD a step, not one a write).
    private var keyConfirmed = false
    static let vouchInterval: TimeInterval = 3600

    /// - Parameters:
    ///   - bucket: the stage's way to the bucket; the signed-in user and this NAS's device
    ///     id come from its grant source.
    ///   - keys: the account's metadata key: nothing is written while it is not `ready`
    ///     (the changes wait in the queue database), and its changes wake the stage.
    ///   - wakes: what else makes the stage look (the daemon passes the account's changes).
    package init(context: StageContext, bucket session: BucketSession, keys: any MetadataKeySource, options: Options,
                 wakes: [StageLoop.Source] = [], alarms: ManifestAlarms? = nil) async {
        self.context = context
        let (database, clock) = (context.database, context.clock)
        self.alarms = alarms
        self.session = session
        self.keySource = keys
        self.options = options
        loop = StageLoop(clock: clock, wakes: [.signal(database.signals.uploaded), .stream(keys.keyChanges.changes())] + wakes)
        retry = options.policy.retry
        ledger = try? await database.manifestLedger()
    }

    package func apply(_ new: Options) async {
        if new.folders != options.folders || new.deviceName != options.deviceName { recordStale = true }
        options = new
        await session.apply(trust: new.trust)
        loop.wake()
    }

    package func run() async throws {
        // A step may wait on credentials or S3 for a long time (the backend down, a slow
        // link): a stop cancels it rather than waiting. A segment cut off on the wire is
        // in the bucket whole or not at all; the next start takes it back or writes it.
        await loop.run { _ in
            let next = await self.step()
            let poll = self.clock.now().addingTimeInterval(await self.options.policy.pollInterval)
            return .wait(until: min(next ?? poll, poll))
        }
        await session.shutdown()
    }

    /// One look: write what is due, or say when to look again (nil: when woken). The
    /// loop's step; the tests take it one at a time.
    package func step() async -> Date? {
        let now = clock.now()
        guard let userId = await session.userId, let deviceId = await session.deviceId else {
            setState(.off)
            return nil
        }
        // Another account or device than the mirror's (a first start, a new sign-in): every
        // file backed up becomes a change to write under this one. Nothing goes to the
        // bucket until there is something to write: a NAS with nothing backed up yet
        // neither asks for credentials nor lists anything.
        if ledger?.userId != userId || ledger?.deviceId != deviceId {
            do {
                let fresh = ManifestLedger(userId: userId, deviceId: deviceId, writer: ledger?.writer ?? UUID().uuidString.lowercased())
                try await database.resetManifest(fresh)
                ledger = fresh
                synced = false
            } catch {
                lastError = "cannot start the manifest in the queue database: \(error)"
                setState(.backoff)
                return now.addingTimeInterval(retry.fail(random: .random(in: 0..<1)))
            }
        }
        let pending = (try? await database.hasManifestChanges()) ?? true
        let plaintext = ledger?.isPlaintext ?? false
        let written = (ledger?.seq ?? 0) > 0
        let ownCheck = written && !plaintext && (nextOwnCheck.map { $0 <= now } ?? true)
        guard pending || needsSnapshot || plaintext || !plaintextLeft.isEmpty || (recordStale && written) || ownCheck else {
            setState(.idle)
            return nil
        }
        // Everything under metadata/ is sealed with the account's key: without it the
        // changes wait in the queue database, and the key's arrival wakes the stage.
        guard case .ready(let accountKey) = await keySource.metadataKeyState() else {
            // Only the look at its own manifest was due: that waits for the key unseen.
            let onlyOwnCheck = !(pending || needsSnapshot || plaintext || !plaintextLeft.isEmpty || (recordStale && written))
            setState(onlyOwnCheck ? .idle : .waitingForKey)
            return nil
        }
        let key = accountKey.metadataKey
        self.accountKey = accountKey
        keyConfirmed = false
        do {
            let store = ManifestStore(session: session, userId: userId)
            let keys = ManifestKeys(userId: userId, deviceId: deviceId)
            if let l = ledger, !l.isPlaintext, l.keyFingerprint != accountKey.fingerprint {
                try await reanchor(store, keys, key, fingerprint: accountKey.fingerprint)
            }
            if !synced {
                try await sync(store, keys, key)
                synced = true
            }
            if ownCheck || nextOwnCheck == nil { try await checkOwn(store, keys, key) }
            if ledger?.isPlaintext ?? false { try await upgrade(store, keys, key) }
            if needsSnapshot { try await compact(store, keys, key) }
            let wait = try await writeDue(store, keys, key, now: now)
            if recordStale && (ledger?.seq ?? 0) > 0 { try await writeRecord(store, keys, key) }
            if !plaintextLeft.isEmpty && !recordStale && (ledger?.seq ?? 0) > 0 { try await deletePlaintext(store, keys) }
            retry.reset()
            lastError = nil
            return wait
        } catch is KeyNoLongerServes {
            // A new account key or a substitution found before writing: nothing more is
            // sealed under this key; the key's change wakes the stage.
            synced = false
            setState(.waitingForKey)
            return nil
        } catch {
            return failed(error)
        }
    }

    /// The bucket's key object changed since the step began, and the key it holds is no
    /// longer this one (or no longer ready).
    private struct KeyNoLongerServes: Error {}

    /// Before anything is sealed: the account key is still the one in force (a HEAD of the
    /// key object; a changed one is looked at whole by the key service).
    private func confirmKey() async throws {
        guard !keyConfirmed else { return }
        guard case .ready(let now) = await keySource.currentKeyState(), now == accountKey else { throw KeyNoLongerServes() }
        keyConfirmed = true
    }

    /// A new account key sealed everything again (this NAS's objects too): the head's
    /// SHA-256 is read again from the bucket, under the new key. Where it cannot be, a
    /// snapshot of the mirror starts the chain again.
    private func reanchor(_ store: ManifestStore, _ keys: ManifestKeys, _ key: MetadataKey, fingerprint: String) async throws {
        guard var l = ledger else { return }
        if l.keyFingerprint != nil && l.seq > 0 {
            let sha = try await store.headSHA(l.seq, snapshot: l.snapshot == l.seq, keys, key)
            if let sha {
                l.headSHA = sha
            } else {
                needsSnapshot = true
            }
            logger.notice("the account key changed: this NAS's manifest goes on under the new one",
                          metadata: ["fingerprint": "\(fingerprint)", "seq": "\(l.seq)", "snapshot": "\(sha == nil)"])
            recordStale = true
            synced = false
        }
        l.keyFingerprint = fingerprint
        try await database.saveManifestLedger(l)
        ledger = l
    }

    /// This NAS's own manifest as the bucket holds it: a plaintext record or segment under a
    /// device that is sealed for good is a downgrade (refused, said, deleted, the record
    /// written again); an older sealed record put back is a rollback (written again).
    private func checkOwn(_ store: ManifestStore, _ keys: ManifestKeys, _ key: MetadataKey) async throws {
        nextOwnCheck = clock.now().addingTimeInterval(options.ownCheckInterval)
        guard let l = ledger, !l.isPlaintext, l.seq > 0 else { return }
        let plaintext = ManifestSync(listing: try await store.keys(under: keys.prefix), keys: keys).plaintext
        let bytes = try await store.bytes(keys.record)
        let action = "Someone with write access to the bucket did this: check who holds the storage credentials (see photolalactl audit)."
        var what: String?
        if let bytes, DeviceRecord.format(of: bytes) == ManifestSegment.formatVersion {
            what = "its device.json was replaced by one in the old plaintext format"
        } else if !plaintext.isEmpty {
            what = "\(plaintext.count) object\(plaintext.count == 1 ? "" : "s") in the old plaintext format were put under it"
        }
        if let what {
            plaintextLeft = plaintext
            recordStale = true
            logger.error("this NAS's own manifest was downgraded in the bucket: \(what); refused, never read, written again sealed",
                         metadata: ["device": "\(keys.deviceId)"])
            await alarms?.raise(device: keys.deviceId, kind: .downgrade,
                                message: "The manifest of this NAS (device \(keys.deviceId)) was downgraded in the bucket: \(what). It is "
                                    + "sealed for good, so the plaintext is refused, never read, and deleted, and the sealed record is "
                                    + "written again.", action: action, details: ["own": true])
            return
        }
        guard let bytes else {
            recordStale = true
            return
        }
        guard let record = try? DeviceRecord.open(bytes, key: key, objectKey: keys.record), record.deviceId == keys.deviceId else {
            recordStale = true
            await alarms?.record(device: keys.deviceId, why: "unauthenticated", message: "\(keys.record) does not authenticate under this account's key: written again")
            return
        }
        if let counter = record.counter, let mine = l.counter, counter < mine {
            recordStale = true
            await alarms?.raise(device: keys.deviceId, kind: .rollback,
                                message: "An older copy of this NAS's device record (device \(keys.deviceId), record \(counter); this NAS "
                                    + "wrote record \(mine)) was put back in the bucket: it is written again.",
                                action: action, details: ["own": true])
            return
        }
        await alarms?.clear(device: keys.deviceId)
    }

    /// Writes the next segment if it is due; returns when to look again.
    private func writeDue(_ store: ManifestStore, _ keys: ManifestKeys, _ key: MetadataKey, now: Date) async throws -> Date? {
        while true {
            // Every upload wakes the stage, and a segment gathers for a minute while uploads
            // go on: reading its (up to 5,000) paths at each wake made the manifest half of
            // the daemon's CPU in a burst. A segment not due for as many records as there
            // are change rows is not due for the fewer records they make.
            if let since = waitingSince {
                let changes = try await database.manifestChangeCount(upTo: options.policy.maxEntriesPerSegment)
                let inFlight = changes > 0 ? (try? await database.hasUploadsInFlight()) ?? true : true
                if changes > 0, case .at(let date) = options.policy.flush(
                    pending: changes, waitingSince: since, uploadsInFlight: inFlight, now: clock.now()) {
                    setState(.pending)
                    return date
                }
            }
            guard let batch = try await database.manifestCandidates(limit: options.policy.maxEntriesPerSegment) else {
                waitingSince = nil
                setState(.idle)
                return nil
            }
            var names = self.names
            let notBefore = ledger?.lastChange ?? .min
            let records = batch.candidates.compactMap {
                ManifestChanges.record(for: $0, folders: options.folders, now: now, notBefore: notBefore, names: { names.ownership($0) })
            }
            self.names = names
            guard !records.isEmpty else {
                try await database.dropManifestChanges(through: batch.through)
                continue
            }
            let since = waitingSince ?? now
            waitingSince = since
            let inFlight = (try? await database.hasUploadsInFlight()) ?? true
            let due = options.policy.flush(pending: records.count, waitingSince: since, uploadsInFlight: inFlight, now: clock.now())
            if case .at(let date) = due {
                setState(.pending)
                return date
            }
            setState(.writing)
            try await confirmKey()
            try await writeLog(records, through: batch.through, store, keys, key)
            waitingSince = nil
            if let l = ledger, options.policy.shouldCompact(logEntries: l.logEntries, logSegments: l.logSegments,
                                                           snapshotEntries: l.snapshotEntries) {
                try await compact(store, keys, key)
            }
        }
    }

    /// A failure the session handed back (credentials and the clock were already tried
    /// again once, in place): the step is tried again after the manifest's own backoff.
    private func failed(_ error: any Error) -> Date? {
        let s3 = error as? S3Error
        // Stopping: the step was cut off on purpose; nothing to report.
        if Task.isCancelled || s3?.kind == .cancelled { return clock.now() }
        // No grant (signed out, paused): nothing was sent; the account's change wakes the stage.
        if s3?.kind == .unavailable { return nil }
        // Another write of ours got there first (a PUT answered too late): take it back, at once.
        let immediate = s3?.kind == .preconditionFailed
        if immediate { synced = false }
        let first = retry.failures == 0
        let delay = retry.fail(random: .random(in: 0..<1))
        let wait = immediate && first ? 0 : delay
        if !(immediate && first) {
            let text = "\(error)"
            if text != lastError { logger.warning("could not write the manifest; retrying in \(Int(wait.rounded()))s: \(text)") }
            lastError = text
            setState(.backoff)
        }
        return clock.now().addingTimeInterval(wait)
    }

    private func setState(_ new: DaemonStatus.Manifest.State) {
        guard new != state else { return }
        state = new
        statusChanges.changed()
    }

    package func contribute(to s: inout DaemonStatus) async {
        let l = ledger
        s.manifest = DaemonStatus.Manifest(
            state: state, deviceId: await session.deviceId, segments: l?.seq ?? 0, snapshot: l?.snapshot ?? 0,
            files: l?.files ?? 0, bytes: l?.bytes ?? 0, writtenAt: l?.writtenAt.map { Timestamp.string(Date(timeIntervalSince1970: $0)) },
            lastError: lastError, format: l.map { $0.isPlaintext ? 1 : 2 })
    }

    // MARK: writing: a log segment (PUT only if the number is free, then recorded), a
    // snapshot (its parts, then its index, then the objects it supersedes deleted), the
    // device record. Every object sealed under the metadata key, for its own key.

    private func writeLog(_ records: [ManifestRecord], through: Int64, _ store: ManifestStore, _ keys: ManifestKeys,
                          _ key: MetadataKey) async throws {
        guard let current = ledger else { return }
        let seq = current.seq + 1
        // The folders above the files, with their owners, when new or changed: first, and
        // no later than the files (an --as-of restore that has a file has its folders).
        let folders = try await folderRecords(for: records, time: records.map(\.time).min() ?? 0)
        let all = folders + records
        var encoder = ManifestSegmentEncoder(header: ManifestHeader(kind: .log, device: keys.deviceId, seq: seq, createdAt: Timestamp.string(clock.now()),
                                                                    writer: current.writer, through: through, prev: current.head.sha256))
        for record in all {
            if let entry = ManifestChanges.entry(record) { encoder.append(entry) }
        }
        let objectKey = keys.log(seq)
        let bytes = encoder.sealed(key: key, objectKey: objectKey)
        // If-None-Match: a number is written once. A 412 means a write of ours got there
        // before its answer did (or before a kill -9): the next step takes it back.
        try await store.put(objectKey, bytes, ifNoneMatch: true)
        let written = clock.now()
        let sha = ManifestSegment.sealedDigestHex(of: bytes)
        ledger = try await database.recordManifestSegment(seq: seq, records: all, through: through) { l in
            l.logged(seq, sha256: sha, records: all, writtenAt: written.timeIntervalSince1970)
        }
        recordStale = true
        logger.debug("manifest segment written", metadata: ["seq": "\(seq)", "entries": "\(all.count)", "bytes": "\(bytes.count)"])
    }

    /// The folder records a batch of file records brings (`ManifestFolders`), against what
    /// the manifest holds of each folder.
    private func folderRecords(for records: [ManifestRecord], time: Int64) async throws -> [ManifestRecord] {
        let wanted = ManifestFolders(records)
        guard !wanted.paths.isEmpty else { return [] }
        let known = try await database.manifestFolderRecords(wanted.paths)
        return wanted.records(known: known, time: time, names: &names)
    }

    /// Writes a snapshot of the whole mirror as of the last segment, then deletes what it
    /// supersedes. Its parts go first and its index last: a reader only uses a snapshot
    /// whose index is there, and nothing older is deleted before that. The parts and the
    /// index name the last log segment they cover (`prev`), so the log after them chains on.
    private func compact(_ store: ManifestStore, _ keys: ManifestKeys, _ key: MetadataKey) async throws {
        try await confirmKey()
        guard var current = ledger else { return }
        let seq = current.seq
        guard seq > 0 else {
            needsSnapshot = false
            return
        }
        setState(.writing)
        let prev = current.head.sha256
        var parts: [ManifestHeader.Part] = []
        var after: (path: String, seq: Int64, ord: Int64)?
        var total = 0
        var bytesWritten = 0
        while true {
            let number = parts.count + 1
            var encoder = ManifestSegmentEncoder(header: ManifestHeader(kind: .snapshot, device: keys.deviceId, seq: seq, part: number,
                                                                        createdAt: Timestamp.string(clock.now()), prev: prev))
            let (read, filled) = try await database.manifestRecords(after: after, limit: options.policy.maxEntriesPerPart,
                                                                   into: (encoder, nil as StoredManifestRecord?)) { page, stored in
                if let entry = ManifestChanges.entry(stored.record) { page.0.append(entry) }
                page.1 = stored
            }
            encoder = filled.0
            let last = filled.1
            if read == 0 && !parts.isEmpty { break }
            let objectKey = keys.snapshotPart(seq, part: number)
            let bytes = encoder.sealed(key: key, objectKey: objectKey)
            try await store.put(objectKey, bytes)
            parts.append(.init(part: number, sha256: ManifestSegment.sealedDigestHex(of: bytes), entries: encoder.count))
            total += encoder.count
            bytesWritten += bytes.count
            guard let last, read == options.policy.maxEntriesPerPart else { break }
            after = (last.record.path, last.seq, last.ord)
        }
        var index = ManifestHeader(kind: .snapshotIndex, device: keys.deviceId, seq: seq, createdAt: Timestamp.string(clock.now()), parts: parts,
                                   prev: prev)
        index.entries = total
        try await store.put(keys.snapshotIndex(seq), ManifestSegment(header: index, entries: []).sealed(key: key, objectKey: keys.snapshotIndex(seq)))
        current.snapshot = seq
        current.logEntries = 0
        current.logSegments = 0
        current.snapshotEntries = Int64(total)
        try await database.saveManifestLedger(current)
        ledger = current
        needsSnapshot = false
        recordStale = true
        logger.info("manifest compacted into a snapshot", metadata: ["seq": "\(seq)", "entries": "\(total)", "parts": "\(parts.count)", "bytes": "\(bytesWritten)"])
        // What the newest complete snapshot makes useless: the logs it covers, older
        // snapshots, unfinished ones older than it.
        let chain = ManifestChain(keys: try await store.keys(under: keys.prefix), layout: keys)
        try await store.delete(chain.stale, keys, why: "compaction", audit: audit, logger: logger)
        // A compaction is a burst: what it freed goes back to the system now.
        photolala_trim_malloc()
    }

    /// `device.json`, sealed: the name, the folders, the last backup, the totals, and the
    /// chain's head with a counter one higher than the last record's (saved first: a
    /// counter is never reused for another head).
    private func writeRecord(_ store: ManifestStore, _ keys: ManifestKeys, _ key: MetadataKey) async throws {
        guard var l = ledger, let accountKey else { return }
        try await confirmKey()
        let seen = await vouches(store, keys, key)
        let wrap = await keySource.recordWrap()
        let counter = (l.counter ?? 0) + 1
        l.counter = counter
        l.keyFingerprint = accountKey.fingerprint
        try await database.saveManifestLedger(l)
        ledger = l
        // The time as S3 keeps it: a reader holds it against the object's LastModified.
        let record = DeviceRecord(
            deviceId: keys.deviceId, name: options.deviceName, folders: options.folders,
            lastBackupAt: l.lastChange.map { Timestamp.string(Date(timeIntervalSince1970: Double($0) / 1000)) },
            files: l.files, bytes: l.bytes, logSeq: l.seq, snapshotSeq: l.snapshot, updatedAt: Timestamp.string(await session.s3Now),
            software: "photolalad \(PhotolalaVersion.current)", counter: counter, head: l.head, seen: seen)
        try await store.put(keys.record, record.sealed(key: accountKey, wrap: wrap, userId: keys.userId, objectKey: keys.record))
        recordStale = false
        try await database.rememberManifestHead(userId: keys.userId, device: keys.deviceId, RememberedHead(counter: counter, head: l.head), now: clock.now())
    }

    /// What this NAS vouches for of the account's other devices (privacy.md "Freshness
    /// without memory"): the newest record counter and segment it read or saw of each. Their
    /// records are read again at most hourly, when this NAS writes its own.
    private func vouches(_ store: ManifestStore, _ keys: ManifestKeys, _ key: MetadataKey) async -> [String: SeenHead] {
        if vouchedAt.map({ clock.now().timeIntervalSince($0) >= Self.vouchInterval }) ?? true {
            vouchedAt = clock.now()
            if let listing = try? await store.keys(under: ManifestKeys.devicesPrefix(keys.userId)) {
                for objectKey in listing {
                    guard let (device, isRecord) = ManifestKeys.deviceOf(key: objectKey, userId: keys.userId), isRecord,
                          device != keys.deviceId, let bytes = try? await store.bytes(objectKey),
                          let record = try? DeviceRecord.open(bytes, key: key, objectKey: objectKey), record.deviceId == device,
                          let counter = record.counter, let head = record.head else { continue }
                    try? await database.rememberManifestHead(userId: keys.userId, device: device, RememberedHead(counter: counter, head: head),
                                                       now: clock.now())
                }
            }
        }
        var seen: [String: SeenHead] = [:]
        for (device, head) in (try? await database.manifestHeads(userId: keys.userId)) ?? [:] where device != keys.deviceId {
            seen[device] = SeenHead(counter: head.counter, seq: head.head.seq)
        }
        return seen
    }

    // MARK: the upgrade from the plaintext format 1

    /// A ledger of format 1: this NAS's manifest is in the bucket in plaintext. It is
    /// written again, sealed, as a snapshot of the mirror (the queue database, never what
    /// the bucket holds in plaintext), then the device record, then the plaintext objects
    /// go. A crash anywhere before the ledger says format 2 does it all again; after, the
    /// sync finds the plaintext left and deletes it.
    private func upgrade(_ store: ManifestStore, _ keys: ManifestKeys, _ key: MetadataKey) async throws {
        guard var current = ledger, current.isPlaintext else { return }
        logger.notice("encrypting this NAS's manifest (format 2): it was written in plaintext by an earlier release",
                      metadata: ["segments": "\(current.seq)"])
        setState(.writing)
        current.headSHA = ManifestHeader.noPrevious
        ledger = current
        if current.seq > 0 { try await compact(store, keys, key) }
        current = ledger ?? current
        current.format = ManifestSegment.sealedFormat
        try await database.saveManifestLedger(current)
        ledger = current
        if current.seq > 0 { try await writeRecord(store, keys, key) }
        plaintextLeft = ManifestSync(listing: try await store.keys(under: keys.prefix), keys: keys).plaintext
        if current.seq > 0 { try await deletePlaintext(store, keys) }
    }

    /// Deletes this device's plaintext segments (the sealed record has replaced the
    /// plaintext one at the same key).
    private func deletePlaintext(_ store: ManifestStore, _ keys: ManifestKeys) async throws {
        let doomed = plaintextLeft
        for key in doomed {
            try await store.delete(key)
            plaintextLeft.removeFirst()
        }
        guard !doomed.isEmpty else { return }
        logger.notice("deleted this NAS's plaintext manifest from the bucket: only the encrypted one remains",
                      metadata: ["objects": "\(doomed.count)"])
        audit?.record(AuditEvent(.s3Delete, by: .daemon, .ok, ["prefix": .string(keys.prefix), "count": .int(Int64(doomed.count)),
                                                                "why": .string("manifest encrypted (format 2)")]))
    }

    // MARK: comparing the bucket's manifest with the ledger (see `ManifestSync`)

    private func sync(_ store: ManifestStore, _ keys: ManifestKeys, _ key: MetadataKey) async throws {
        var current = try await database.manifestLedger() ?? ManifestLedger(userId: nil, deviceId: nil)
        if current.userId != keys.userId || current.deviceId != keys.deviceId {
            // Another account or device than the mirror's (a first start, a new sign-in):
            // everything backed up is written again under this one.
            if current.userId != nil { logger.notice("the manifest starts over for this account and device") }
            current = ManifestLedger(userId: keys.userId, deviceId: keys.deviceId, writer: current.writer)
            try await database.resetManifest(current)
        }
        ledger = current
        let plan = ManifestSync(listing: try await store.keys(under: keys.prefix), keys: keys)
        plaintextLeft = plan.plaintext
        // The record's counter only grows, even when this database is newer than the record.
        if let bytes = try await store.bytes(keys.record), DeviceRecord.format(of: bytes) == ManifestSegment.sealedFormat,
           let record = try? DeviceRecord.open(bytes, key: key, objectKey: keys.record), let counter = record.counter,
           counter > (current.counter ?? 0) {
            current.counter = counter
            try await database.saveManifestLedger(current)
            ledger = current
        }
        recordStale = true
        // A plaintext manifest is written again whole by the upgrade, from the mirror.
        if current.isPlaintext { return }
        if let snapshot = plan.rebuild(ledgerSeq: current.seq) {
            current = try await rebuild(from: snapshot, store, keys, key, writer: current.writer)
        }
        for seq in plan.toAdopt(after: current.seq) {
            let segment: ManifestSegment
            let sealed: [UInt8]
            do {
                (segment, sealed, _) = try await store.sealedSegment(keys.log(seq), key: key)
                // Taken back only if it is the next link of this chain.
                guard segment.header.kind == .log, segment.header.seq == seq, segment.header.prev == current.head.sha256 else {
                    throw ManifestReadError.damaged(keys.log(seq), "it does not follow segment \(seq - 1)")
                }
            } catch let error as ManifestReadError {
                logger.warning("a manifest segment in the bucket cannot be used; writing it again: \(error)")
                try await store.delete(plan.unusable(seq), keys, why: "unusable segment", audit: audit, logger: logger)
                break
            }
            current = try await adopt(segment, seq: seq, sha256: ManifestSegment.sealedDigestHex(of: sealed))
            logger.notice("took back a manifest segment written before a stop", metadata: ["seq": "\(seq)"])
        }
        switch plan.outcome(ledgerSeq: current.seq, ledgerSnapshot: current.snapshot) {
        case .writeSnapshot:
            logger.warning("the bucket lacks manifest segments this NAS wrote; writing a snapshot of the whole manifest again")
            needsSnapshot = true
        case .tidy(let stale):
            try await store.delete(stale, keys, why: "tidy", audit: audit, logger: logger)
        }
        ledger = current
    }

    /// Records a segment read back from the bucket as if just written. The changes it
    /// consumed are dropped only if this database wrote it.
    private func adopt(_ segment: ManifestSegment, seq: Int64, sha256: String) async throws -> ManifestLedger {
        let records = segment.entries.compactMap(ManifestChanges.record)
        let mine = segment.header.writer == ledger?.writer
        let written = Timestamp.parse(segment.header.createdAt)?.timeIntervalSince1970
        let saved = try await database.recordManifestSegment(seq: seq, records: records, through: mine ? segment.header.through : nil) { l in
            l.logged(seq, sha256: sha256, records: records, writtenAt: written)
        }
        ledger = saved
        return saved
    }

    /// A new mirror from the snapshot `seq` (`ManifestRebuild`); the record's counter stays.
    private func rebuild(from seq: Int64, _ store: ManifestStore, _ keys: ManifestKeys, _ key: MetadataKey, writer: String) async throws -> ManifestLedger {
        logger.notice("rebuilding the manifest mirror from the bucket", metadata: ["snapshot": "\(seq)"])
        let result = try await ManifestRebuild(database: database, store: store, keys: keys, key: key)
            .mirror(from: seq, writer: writer, counter: ledger?.counter)
        ledger = result
        return result
    }
}
