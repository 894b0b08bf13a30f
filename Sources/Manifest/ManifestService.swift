import AsyncHTTPClient
import Backend
import Bucket
import CLinux
import Credentials
import Foundation
import Logging
import ManifestFormat
import PhotolalaCore
import Queue
import ServiceLifecycle
import Upload

/// The manifest stage: takes the paths whose backed-up state changed (`manifest_change`,
/// filled by the queue's triggers) and appends them to this NAS's manifest in the bucket
/// as self-checking log segments, compacted now and then into a snapshot (docs/manifest.md).
/// A segment is recorded in the queue only after the bucket took it, in one transaction
/// with the changes it consumed, so a kill -9 loses nothing and at worst leaves one
/// segment written but unrecorded, which the next start finds and takes back.
///
/// Woken by the queue's `uploaded` signal and the account's changes; it also looks every
/// `pollInterval` for changes nothing signals (files gone or moved).
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
    private let account: AccountService
    private let logger: Logger
    private var options: Options
    private let uploadPolicy = UploadPolicy()
    private let http: HTTPClient
    private let wake = WakeSignal()
    private var clockOffset: TimeInterval = 0
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

    package init(database: QueueDatabase, account: AccountService, options: Options, logger: Logger,
                 statusChanges: ChangeFeed = ChangeFeed()) {
        self.database = database
        self.account = account
        self.options = options
        self.logger = logger
        self.statusChanges = statusChanges
        retry = options.policy.retry
        http = S3Client.makeHTTPClient(maximumConnectionsPerHost: 2)
        ledger = try? database.manifestLedger()
    }

    package func apply(_ new: Options) {
        if new.folders != options.folders || new.deviceName != options.deviceName { recordStale = true }
        options = new
        Task { await wake.notify() }
    }

    package func run() async throws {
        let uploaded = database.signals.uploaded
        let accountChanges = account.statusChanges.changes()
        let relays = [
            Task { [wake] in
                await uploaded.onEveryNotify { await wake.notify() }
            },
            Task { [wake] in
                for await _ in accountChanges { await wake.notify() }
            },
        ]
        // A step may wait on credentials or S3 for a long time (the backend down, a slow
        // link): a stop cancels it rather than waiting. A segment cut off on the wire is
        // in the bucket whole or not at all; the next start takes it back or writes it.
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let since = await self.wake.current
                let next = await self.step()
                let poll = Date().addingTimeInterval(await self.options.policy.pollInterval)
                await self.wake.wait(since: since, until: min(next ?? poll, poll))
            }
        }
        for relay in relays { relay.cancel() }
        try? await http.shutdown()
    }

    /// One look: write what is due, or say when to look again (nil: when woken).
    func step() async -> Date? {
        let now = Date()
        guard let userId = await account.userId, let deviceId = await account.deviceId else {
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
        let grant: STSGrant
        do {
            grant = try await account.credentials()
        } catch {
            return nil
        }
        do {
            let store = try ManifestStore(grant: grant, userId: userId, trust: options.trust, http: http, clockOffset: clockOffset, logger: logger)
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
            return await failed(error, grant: grant)
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
                    pending: changes, waitingSince: since, uploadsInFlight: (try? database.hasUploadsInFlight()) ?? true, now: Date()) {
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
                                           uploadsInFlight: (try? database.hasUploadsInFlight()) ?? true, now: Date())
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

    /// A failure: the uploader's rule says what it means; the step is tried again after
    /// the manifest's own backoff.
    private func failed(_ error: any Error, grant: STSGrant) async -> Date {
        // Stopping: the step was cut off on purpose; nothing to report.
        if Task.isCancelled || (error as? S3Error)?.kind == .cancelled { return Date() }
        var immediate = false
        if let s3 = error as? S3Error {
            switch uploadPolicy.action(for: s3, credentialRetries: retry.failures == 0 ? 0 : 1, skewRetries: 0) {
            case .refreshCredentials:
                await account.rejectedByS3(grant)
                immediate = true
            case .correctClock:
                if let offset = s3.clockOffset() { clockOffset = offset }
                immediate = true
            case .alreadyPresent:
                // Another write of ours got there first (a PUT answered too late): take it back.
                synced = false
                immediate = true
            default:
                break
            }
        }
        let first = retry.failures == 0
        let delay = retry.fail(random: .random(in: 0..<1))
        let wait = immediate && first ? 0 : delay
        if !(immediate && first) {
            let text = "\(error)"
            if text != lastError { logger.warning("could not write the manifest; retrying in \(Int(wait.rounded()))s: \(text)") }
            lastError = text
            setState(.backoff)
        }
        return Date().addingTimeInterval(wait)
    }

    private func setState(_ new: DaemonStatus.Manifest.State) {
        guard new != state else { return }
        state = new
        statusChanges.changed()
    }

    package func contribute(to s: inout DaemonStatus) async {
        let l = ledger
        s.manifest = DaemonStatus.Manifest(
            state: state, deviceId: await account.deviceId, segments: l?.seq ?? 0, snapshot: l?.snapshot ?? 0,
            files: l?.files ?? 0, bytes: l?.bytes ?? 0, writtenAt: l?.writtenAt.map { Timestamp.string(Date(timeIntervalSince1970: $0)) },
            lastError: lastError)
    }

    // MARK: writing: a log segment (PUT only if the number is free, then recorded), a
    // snapshot (its parts, then its index, then the objects it supersedes deleted), the
    // device record.

    private func writeLog(_ records: [ManifestRecord], through: Int64, _ store: ManifestStore, _ keys: ManifestKeys) async throws {
        guard let current = ledger else { return }
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
        // What the newest complete snapshot makes useless: the logs it covers, older
        // snapshots, unfinished ones older than it.
        let chain = ManifestChain(keys: try await store.keys(under: keys.prefix), layout: keys)
        for key in chain.stale { try await store.delete(key) }
        // A compaction is a burst: what it freed goes back to the system now.
        photolala_trim_malloc()
    }

    /// `device.json`: the name, the folders, the last backup and the totals.
    private func writeRecord(_ store: ManifestStore, _ keys: ManifestKeys) async throws {
        guard let l = ledger else { return }
        let record = DeviceRecord(
            deviceId: keys.deviceId, name: options.deviceName, folders: options.folders,
            lastBackupAt: l.lastChange.map { Timestamp.string(Date(timeIntervalSince1970: Double($0) / 1000)) },
            files: l.files, bytes: l.bytes, logSeq: l.seq, snapshotSeq: l.snapshot, updatedAt: Timestamp.string(Date()),
            software: "photolalad \(PhotolalaVersion.current)")
        try await store.put(keys.record, record.encoded(), contentType: "application/json")
        recordStale = false
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
                for key in plan.unusable(seq) { try await store.delete(key) }
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
            for key in stale { try await store.delete(key) }
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
