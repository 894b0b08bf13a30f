import AsyncHTTPClient
import Account
import Bucket
import Foundation
import Logging
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

    let database: QueueDatabase
    let account: AccountService
    let logger: Logger
    var options: Options
    let uploadPolicy = UploadPolicy()
    let http: HTTPClient
    let wake = WakeSignal()
    var clockOffset: TimeInterval = 0
    var ledger: ManifestLedger?
    /// Whether the bucket's manifest was compared with the ledger since the account (or
    /// the process) started.
    var synced = false
    /// The bucket lost objects the ledger records: write a snapshot from the mirror.
    var needsSnapshot = false
    /// The device record in the bucket no longer says what the ledger does.
    var recordStale = true
    var waitingSince: Date?
    var retry: Backoff
    var state: DaemonStatus.Manifest.State = .off
    var lastError: String?
    let statusChanges: ChangeFeed

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

    func setState(_ new: DaemonStatus.Manifest.State) {
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
}
