import Bucket
import CLinux
import Foundation
import Logging
import ManifestFormat
import PhotolalaCore
import Queue
import ServiceLifecycle

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
package actor ManifestService: Service {
    package struct Options: Sendable, Equatable {
        package var folders: [String]
        package var deviceName: String
        package var policy: ManifestPolicy
        package var trust: TLSTrust

        /// The one mapping from settings, at start and on reload.
        package init(_ settings: Settings, environment: [String: String] = ProcessInfo.processInfo.environment) {
            folders = settings.watch.folders
            deviceName = settings.account.deviceName ?? HostName.current()
            policy = ManifestPolicy()
            trust = TLSTrust(caFile: settings.tls.caFile)
            // A tuning knob for tests and for people measuring compaction: compact after
            // this many log segments (docs/manifest.md).
            if let n = environment["PHOTOLALAD_MANIFEST_COMPACT_SEGMENTS"].flatMap(Int.init), n > 0 {
                policy.maxLogSegments = n
            }
        }
    }

    private let database: QueueDatabase
    private let session: BucketSession
    private let clock: any DaemonClock
    private let loop: StageLoop
    private let logger: Logger
    private var options: Options
    private var ledger: ManifestLedger?
    /// Whether the bucket's manifest was compared with the ledger since the account (or
    /// the process) started.
    private var synced = false
    /// The bucket lost objects the ledger records: write a snapshot from the mirror.
    private var needsSnapshot = false
    /// The device record in the bucket no longer says what the ledger does.
    private var recordStale = true
    private var waitingSince: Date?
    private var retry: Backoff
    private var state: DaemonStatus.Manifest.State = .off
    private var lastError: String?
    private let statusChanges: ChangeFeed
    /// Every delete in the bucket, recorded (cli.md "audit": `s3.delete`).
    private let audit: (any AuditRecorder)?

    /// - Parameters:
    ///   - bucket: the stage's way to the bucket; the signed-in user and this NAS's device
    ///     id come from its grant source.
    ///   - wakes: what else makes the stage look (the daemon passes the account's changes).
    package init(database: QueueDatabase, bucket session: BucketSession, options: Options, clock: any DaemonClock = SystemClock(),
                 wakes: [StageLoop.Source] = [], logger: Logger, statusChanges: ChangeFeed = ChangeFeed(),
                 audit: (any AuditRecorder)? = nil) {
        self.database = database
        self.audit = audit
        self.session = session
        self.options = options
        self.clock = clock
        self.logger = logger
        self.statusChanges = statusChanges
        loop = StageLoop(clock: clock, wakes: [.signal(database.signals.uploaded)] + wakes)
        retry = options.policy.retry
        ledger = try? database.manifestLedger()
    }

    package func apply(_ new: Options) async {
        if new.folders != options.folders || new.deviceName != options.deviceName { recordStale = true }
        options = new
        await session.apply(trust: new.trust)
        await loop.wake()
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
    func step() async -> Date? {
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
                try database.resetManifest(fresh)
                ledger = fresh
                synced = false
            } catch {
                lastError = "cannot start the manifest in the queue database: \(error)"
                setState(.backoff)
                return now.addingTimeInterval(retry.fail(random: .random(in: 0..<1)))
            }
        }
        let pending = (try? database.hasManifestChanges()) ?? true
        guard pending || needsSnapshot || (recordStale && (ledger?.seq ?? 0) > 0) else {
            setState(.idle)
            return nil
        }
        do {
            let store = ManifestStore(session: session, userId: userId)
            let keys = ManifestKeys(userId: userId, deviceId: deviceId)
            if !synced {
                try await sync(store, keys)
                synced = true
            }
            if needsSnapshot { try await compact(store, keys) }
            let wait = try await writeDue(store, keys, now: now)
            if recordStale && (ledger?.seq ?? 0) > 0 { try await writeRecord(store, keys) }
            retry.reset()
            lastError = nil
            return wait
        } catch {
            return failed(error)
        }
    }

    /// Writes the next segment if it is due; returns when to look again.
    private func writeDue(_ store: ManifestStore, _ keys: ManifestKeys, now: Date) async throws -> Date? {
        while true {
            // Every upload wakes the stage, and a segment gathers for a minute while uploads
            // go on: reading its (up to 5,000) paths at each wake made the manifest half of
            // the daemon's CPU in a burst. A segment not due for as many records as there
            // are change rows is not due for the fewer records they make.
            if let since = waitingSince {
                let changes = try database.manifestChangeCount(upTo: options.policy.maxEntriesPerSegment)
                if changes > 0, case .at(let date) = options.policy.flush(
                    pending: changes, waitingSince: since, uploadsInFlight: (try? database.hasUploadsInFlight()) ?? true, now: clock.now()) {
                    setState(.pending)
                    return date
                }
            }
            guard let batch = try database.manifestCandidates(limit: options.policy.maxEntriesPerSegment) else {
                waitingSince = nil
                setState(.idle)
                return nil
            }
            let records = batch.candidates.compactMap { ManifestChanges.record(for: $0, folders: options.folders, now: now) }
            guard !records.isEmpty else {
                try database.dropManifestChanges(through: batch.through)
                continue
            }
            let since = waitingSince ?? now
            waitingSince = since
            let due = options.policy.flush(pending: records.count, waitingSince: since,
                                           uploadsInFlight: (try? database.hasUploadsInFlight()) ?? true, now: clock.now())
            if case .at(let date) = due {
                setState(.pending)
                return date
            }
            setState(.writing)
            try await writeLog(records, through: batch.through, store, keys)
            waitingSince = nil
            if let l = ledger, options.policy.shouldCompact(logEntries: l.logEntries, logSegments: l.logSegments,
                                                           snapshotEntries: l.snapshotEntries) {
                try await compact(store, keys)
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
            lastError: lastError)
    }

    // MARK: writing: a log segment (PUT only if the number is free, then recorded), a
    // snapshot (its parts, then its index, then the objects it supersedes deleted), the
    // device record.

    private func writeLog(_ records: [ManifestRecord], through: Int64, _ store: ManifestStore, _ keys: ManifestKeys) async throws {
        guard let current = ledger else { return }
        let seq = current.seq + 1
        var encoder = ManifestSegmentEncoder(header: ManifestHeader(kind: .log, device: keys.deviceId, seq: seq, createdAt: Timestamp.string(clock.now()),
                                                                    writer: current.writer, through: through))
        for record in records {
            if let entry = ManifestChanges.entry(record) { encoder.append(entry) }
        }
        let bytes = encoder.finish()
        // If-None-Match: a number is written once. A 412 means a write of ours got there
        // before its answer did (or before a kill -9): the next step takes it back.
        try await store.put(keys.log(seq), bytes, ifNoneMatch: true)
        let written = clock.now()
        ledger = try database.recordManifestSegment(seq: seq, records: records, through: through) { l in
            l.logged(seq, records: records, writtenAt: written.timeIntervalSince1970)
        }
        recordStale = true
        logger.debug("manifest segment written", metadata: ["seq": "\(seq)", "entries": "\(records.count)", "bytes": "\(bytes.count)"])
    }

    /// Writes a snapshot of the whole mirror as of the last segment, then deletes what it
    /// supersedes. Its parts go first and its index last: a reader only uses a snapshot
    /// whose index is there, and nothing older is deleted before that.
    private func compact(_ store: ManifestStore, _ keys: ManifestKeys) async throws {
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
                                                                        createdAt: Timestamp.string(clock.now())))
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
        var index = ManifestHeader(kind: .snapshotIndex, device: keys.deviceId, seq: seq, createdAt: Timestamp.string(clock.now()), parts: parts)
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
        // What the newest complete snapshot makes useless: the logs it covers, older
        // snapshots, unfinished ones older than it.
        let chain = ManifestChain(keys: try await store.keys(under: keys.prefix), layout: keys)
        try await delete(chain.stale, store, keys, why: "compaction")
        // A compaction is a burst: what it freed goes back to the system now.
        photolala_trim_malloc()
    }

    /// `device.json`: the name, the folders, the last backup and the totals.
    private func writeRecord(_ store: ManifestStore, _ keys: ManifestKeys) async throws {
        guard let l = ledger else { return }
        let record = DeviceRecord(
            deviceId: keys.deviceId, name: options.deviceName, folders: options.folders,
            lastBackupAt: l.lastChange.map { Timestamp.string(Date(timeIntervalSince1970: Double($0) / 1000)) },
            files: l.files, bytes: l.bytes, logSeq: l.seq, snapshotSeq: l.snapshot, updatedAt: Timestamp.string(clock.now()),
            software: "photolalad \(PhotolalaVersion.current)")
        try await store.put(keys.record, record.encoded(), contentType: "application/json")
        recordStale = false
    }

    /// Deletes `stale` one by one, then records how many went (and, if one failed after
    /// some went, that it did).
    private func delete(_ stale: [String], _ store: ManifestStore, _ keys: ManifestKeys, why: String) async throws {
        guard !stale.isEmpty else { return }
        var deleted = 0
        func record(_ outcome: AuditOutcome, _ error: (any Error)? = nil) {
            var details: AuditDetails = ["prefix": .string(keys.prefix), "count": .int(Int64(deleted)), "why": .string(why)]
            if let error { details["error"] = .string("\(error)"); details["of"] = .int(Int64(stale.count)) }
            audit?.record(AuditEvent(.s3Delete, by: .daemon, outcome, details))
            logger.info("deleted manifest objects", metadata: ["prefix": "\(keys.prefix)", "count": "\(deleted)", "why": "\(why)"])
        }
        do {
            for key in stale {
                try await store.delete(key)
                deleted += 1
            }
        } catch {
            // What went before the failure is recorded; a delete that failed removed nothing.
            if deleted > 0 { record(.failed, error) }
            throw error
        }
        record(.ok)
    }

    // MARK: comparing the bucket's manifest with the ledger (see `ManifestSync`)

    private func sync(_ store: ManifestStore, _ keys: ManifestKeys) async throws {
        var current = try database.manifestLedger() ?? ManifestLedger(userId: nil, deviceId: nil)
        if current.userId != keys.userId || current.deviceId != keys.deviceId {
            // Another account or device than the mirror's (a first start, a new sign-in):
            // everything backed up is written again under this one.
            if current.userId != nil { logger.notice("the manifest starts over for this account and device") }
            current = ManifestLedger(userId: keys.userId, deviceId: keys.deviceId, writer: current.writer)
            try database.resetManifest(current)
        }
        ledger = current
        let plan = ManifestSync(listing: try await store.keys(under: keys.prefix), keys: keys)
        if let snapshot = plan.rebuild(ledgerSeq: current.seq) {
            current = try await rebuild(from: snapshot, store, keys, writer: current.writer)
        }
        for seq in plan.toAdopt(after: current.seq) {
            let segment: ManifestSegment
            do {
                segment = try await store.segment(keys.log(seq)).segment
            } catch let error as ManifestReadError {
                logger.warning("a manifest segment in the bucket cannot be used; writing it again: \(error)")
                try await delete(plan.unusable(seq), store, keys, why: "unusable segment")
                break
            }
            current = try adopt(segment, seq: seq)
            logger.notice("took back a manifest segment written before a stop", metadata: ["seq": "\(seq)"])
        }
        switch plan.outcome(ledgerSeq: current.seq, ledgerSnapshot: current.snapshot) {
        case .writeSnapshot:
            logger.warning("the bucket lacks manifest segments this NAS wrote; writing a snapshot of the whole manifest again")
            needsSnapshot = true
        case .tidy(let stale):
            try await delete(stale, store, keys, why: "tidy")
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
            l.logged(seq, records: records, writtenAt: written)
        }
        ledger = saved
        return saved
    }

    /// A new mirror from the snapshot `seq`; every backed-up file stays a change, which
    /// then finds its record already there and writes nothing.
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

/// The manifest's objects in the bucket under `metadata/{userId}/`, through the stage's
/// session: each request on its own, with no transient retry in place
/// (`BucketBudget.handBack`): a failed step is tried again on the stage's backoff.
private struct ManifestStore: ManifestObjects {
    let session: BucketSession
    let prefix: String

    init(session: BucketSession, userId: String) {
        self.session = session
        prefix = ManifestKeys.userPrefix(userId)
    }

    func keys(under prefix: String, from token: String?) async throws(S3Error) -> (keys: [String], next: String?) {
        let page = try await session.perform(under: self.prefix) { bucket throws(S3Error) in
            try await bucket.listObjects(prefix: prefix, continuationToken: token)
        }
        return (page.objects.map(\.key), page.nextContinuationToken)
    }

    func bytes(_ key: String) async throws(S3Error) -> [UInt8]? {
        try await session.perform(under: prefix) { bucket throws(S3Error) in try await bucket.getObjectIfPresent(key: key)?.bytes }
    }

    func put(_ key: String, _ bytes: [UInt8], contentType: String = "application/octet-stream", ifNoneMatch: Bool = false) async throws(S3Error) {
        _ = try await session.perform(under: prefix) { bucket throws(S3Error) in
            try await bucket.putObject(key: key, bytes: bytes, contentType: contentType, ifNoneMatch: ifNoneMatch)
        }
    }

    func delete(_ key: String) async throws(S3Error) {
        try await session.perform(under: prefix) { bucket throws(S3Error) in try await bucket.deleteObject(key: key) }
    }
}
