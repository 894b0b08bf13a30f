/// Restore: bringing files back from the bucket. The daemon's side (devices, the manifest,
/// objects read back with its credentials and relayed to `photolalactl`) and the command's
/// (the plan, the files written with the rights of whoever runs it).
import AsyncHTTPClient
import Backend
import Bucket
import Control
import Credentials
import Foundation
import Logging
import ManifestFormat
import NIOCore
import PhotolalaCore
import ServiceLifecycle
import Synchronization
import Upload

/// The network side of `photolalactl restore`: lists the account's devices, reads a
/// device's manifest, asks objects back from archive classes and relays objects to the
/// command, read with ranged, parallel GETs under the uploads' retry rule and bandwidth
/// limit. The command never sees a credential: it gets bytes.
package actor RestoreService: Service {
    package struct Options: Sendable, Equatable {
        /// `upload.bandwidth_limit`, applied to what restores read as well.
        package var bandwidthLimit: Int64?
        /// Objects larger than this are read as ranges of `rangeSize`, `parallelRanges` at a time.
        package var rangeThreshold: Int64 = 16 << 20
        package var rangeSize: Int64 = 8 << 20
        package var parallelRanges = 3
        /// Ranges held in memory at once, over every restore (bounds the daemon's memory).
        package var bufferBudget: Int64 = 24 << 20
        /// HEADs in flight when asking where objects stand.
        package var headConcurrency = 16
        /// Days a copy brought back from an archive class stays readable.
        package var thawDays = 7
        /// The system CA store plus `tls.ca_file`, as for every other connection.
        package var trust: TLSTrust

        package init(_ settings: Settings) {
            bandwidthLimit = settings.upload.bandwidthLimit
            trust = TLSTrust(caFile: settings.tls.caFile)
        }
    }

    private let account: AccountService
    private let logger: Logger
    private var options: Options
    private let policy = UploadPolicy()
    private let http: HTTPClient
    private let bandwidth: TokenBucket
    private let budget: ByteBudget
    private let meter = RateMeter()
    private var sessions = RestoreSessions()
    private var clockOffset: TimeInterval = 0

    package init(account: AccountService, options: Options, logger: Logger) {
        self.account = account
        self.options = options
        self.logger = logger
        bandwidth = TokenBucket(bytesPerSecond: options.bandwidthLimit)
        budget = ByteBudget(capacity: options.bufferBudget)
        http = S3Client.makeHTTPClient(maximumConnectionsPerHost: 32)
    }

    package func apply(_ new: Options) async {
        options = new
        await bandwidth.setRate(new.bandwidthLimit)
    }

    package func run() async throws {
        try? await gracefulShutdown()
        try? await http.shutdown()
    }

    // MARK: devices and their manifests, as the bucket holds them

    /// `photolalactl devices`: every device with a manifest under this account, this NAS first.
    package func devices() async -> ControlResponse {
        let reached = await access()
        guard case .ready(let grant, let userId) = reached else {
            if case .unavailable(let response) = reached { return response }
            return .error(503, "unavailable", "the bucket cannot be reached now")
        }
        var attempt = 0
        var refreshed = false
        while true {
            do {
                let store = try objects(grant, userId: userId)
                let keys = try await store.keys(under: ManifestKeys.devicesPrefix(userId))
                var found: [String: Bool] = [:]
                for key in keys {
                    guard let (device, isRecord) = ManifestKeys.deviceOf(key: key, userId: userId) else { continue }
                    found[device] = (found[device] ?? false) || isRecord
                }
                let current = await account.deviceId
                var list: [DeviceList.Device] = []
                for (id, hasRecord) in found {
                    let layout = ManifestKeys(userId: userId, deviceId: id)
                    let record = hasRecord ? try await store.bytes(layout.record).flatMap(DeviceRecord.decode) : nil
                    list.append(DeviceList.Device(
                        id: id, name: record?.name, folders: record?.folders ?? [], lastBackupAt: record?.lastBackupAt,
                        files: record?.files ?? 0, bytes: record?.bytes ?? 0, current: id == current, updatedAt: record?.updatedAt))
                }
                list.sort { a, b in
                    a.current != b.current ? a.current : (a.lastBackupAt ?? "", a.id) > (b.lastBackupAt ?? "", b.id)
                }
                return .json(DeviceList(devices: list))
            } catch {
                if await shouldRetry(error, grant: grant, attempt: &attempt, refreshed: &refreshed) { continue }
                return .error(502, "storage_error", "could not list the devices in the bucket: \(error)")
            }
        }
    }

    /// `GET /v1/manifest?device=ID`: the device's manifest segments, checked, then a report
    /// (see `ManifestFrames`).
    package func manifest(device: String) async -> ControlResponse {
        guard !device.isEmpty, device.utf8.count <= 64, device.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x41 && $0 <= 0x5a) }) else {
            return .error(400, "bad_request", "device must be a device id (photolalactl devices lists them)")
        }
        let reached = await access()
        guard case .ready(let grant, let userId) = reached else {
            if case .unavailable(let response) = reached { return response }
            return .error(503, "unavailable", "the bucket cannot be reached now")
        }
        let store: BucketManifestObjects
        do {
            store = try objects(grant, userId: userId)
        } catch {
            return .error(502, "storage_error", "\(error)")
        }
        let logger = self.logger
        return .stream { writer in
            do {
                try await writer.begin(contentType: "application/octet-stream", contentLength: nil)
                let reader = ManifestReader(store: store, keys: ManifestKeys(userId: userId, deviceId: device))
                var report = try await reader.read { _, bytes in try await writer.write(ManifestFrames.segment(bytes)) }
                if report.segments == 0 && report.problems.isEmpty { report.problems.append("no manifest for device \(device)") }
                try await writer.write(ManifestFrames.report(report))
                try await writer.finish()
            } catch {
                // Cut off without a report: the command takes it for an error.
                logger.warning("a manifest could not be sent whole: \(error)")
            }
        }
    }

    // MARK: where objects stand (HEAD), and asking archived ones back (`RestoreObject`)

    /// One status per MD5 asked; `thaw` also asks every archived one back.
    package func objects(_ query: ObjectQuery, thaw: Bool) async -> ControlResponse {
        guard query.md5s.count <= ObjectQuery.maxBatch else {
            return .error(400, "bad_request", "at most \(ObjectQuery.maxBatch) objects a call")
        }
        guard query.md5s.allSatisfy(Self.isMD5) else { return .error(400, "bad_request", "md5s must be 32 lowercase hex digits") }
        let reached = await access()
        guard case .ready(let grant, let userId) = reached else {
            if case .unavailable(let response) = reached { return response }
            return .error(503, "unavailable", "the bucket cannot be reached now")
        }
        let limit = options.headConcurrency
        let statuses = await withTaskGroup(of: (Int, ObjectStatus).self) { group in
            var out = [ObjectStatus?](repeating: nil, count: query.md5s.count)
            var next = 0
            func launch() {
                guard next < query.md5s.count else { return }
                let (i, md5) = (next, query.md5s[next])
                next += 1
                group.addTask { (i, await self.status(of: md5, grant: grant, userId: userId, thaw: thaw)) }
            }
            for _ in 0..<min(limit, query.md5s.count) { launch() }
            for await (i, status) in group {
                out[i] = status
                launch()
            }
            return out.compactMap { $0 }
        }
        return .json(ObjectStatusList(objects: statuses))
    }

    private func status(of md5: String, grant: STSGrant, userId: String, thaw: Bool) async -> ObjectStatus {
        let key = "photos/\(userId)/\(md5).dat"
        var attempt = 0
        var refreshed = false
        while true {
            do {
                let (client, credentials) = try client(grant, prefix: "photos/\(userId)/")
                guard let info = try await client.headObject(key: key, credentials: credentials) else {
                    return ObjectStatus(md5: md5, state: .missing)
                }
                let storageClass = info.storageClass ?? "STANDARD"
                guard info.needsRestore else { return ObjectStatus(md5: md5, state: .ready, size: info.size, storageClass: storageClass) }
                if info.restore == .inProgress { return ObjectStatus(md5: md5, state: .restoring, size: info.size, storageClass: storageClass) }
                guard thaw else { return ObjectStatus(md5: md5, state: .archived, size: info.size, storageClass: storageClass) }
                switch try await client.restoreObject(key: key, days: options.thawDays, credentials: credentials) {
                case .available: return ObjectStatus(md5: md5, state: .ready, size: info.size, storageClass: storageClass)
                case .started, .inProgress:
                    logger.info("asked an archived object back", metadata: ["key": "\(key)", "class": "\(storageClass)"])
                    return ObjectStatus(md5: md5, state: .restoring, size: info.size, storageClass: storageClass)
                }
            } catch {
                if await shouldRetry(error, grant: grant, attempt: &attempt, refreshed: &refreshed) { continue }
                return ObjectStatus(md5: md5, state: .unknown, message: error.description)
            }
        }
    }

    /// `GET /v1/restore/listing`, for a restore that wants most of the bucket (one request
    /// per 1,000 objects instead of a HEAD per object): one line per object of
    /// `photos/{userId}/`, `md5 size storageClass`, streamed a page at a time (the daemon
    /// holds one page), then `end` on a line of its own.
    package func listing() async -> ControlResponse {
        let reached = await access()
        guard case .ready(let grant, let userId) = reached else {
            if case .unavailable(let response) = reached { return response }
            return .error(503, "unavailable", "the bucket cannot be reached now")
        }
        let prefix = "photos/\(userId)/"
        return .stream { writer in
            var token: String?
            var begun = false
            var attempt = 0
            var refreshed = false
            var grant = grant
            while true {
                let page: S3Client.ListPage
                do throws(S3Error) {
                    let (client, credentials) = try await self.client(grant, prefix: prefix)
                    page = try await client.listObjects(prefix: prefix, continuationToken: token, credentials: credentials)
                } catch {
                    guard await self.shouldRetry(error, grant: grant, attempt: &attempt, refreshed: &refreshed) else {
                        if !begun { await writer.respond(.error(502, "storage_error", "could not list \(prefix): \(error)")) }
                        return
                    }
                    if refreshed, let fresh = try? await self.account.credentials() { grant = fresh }
                    continue
                }
                attempt = 0
                var text = ""
                for o in page.objects {
                    let name = o.key.dropFirst(prefix.count)
                    guard name.hasSuffix(".dat"), Self.isMD5(String(name.dropLast(4))) else { continue }
                    text += "\(name.dropLast(4)) \(o.size) \(o.storageClass)\n"
                }
                token = page.nextContinuationToken
                if token == nil { text += "end\n" }
                do {
                    if !begun {
                        try await writer.begin(contentType: "text/plain", contentLength: nil)
                        begun = true
                    }
                    try await writer.write(Array(text.utf8))
                    if token == nil {
                        try await writer.finish()
                        return
                    }
                } catch {
                    return
                }
            }
        }
    }

    private static func isMD5(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    // MARK: relaying one object to the command: small ones in one streamed GET (resumed
    // from where it broke off if the connection drops), big ones as ranges read several at
    // a time and sent in order. Whatever goes wrong before the first byte is answered as
    // an error the command can show; after it, the body is cut short, which the command sees.

    /// `GET /v1/restore/object?md5=M&size=N` (N: the size the manifest gives).
    package func object(md5: String, expectedSize: Int64?) async -> ControlResponse {
        guard Self.isMD5(md5) else { return .error(400, "bad_request", "md5 must be 32 lowercase hex digits") }
        let reached = await access()
        guard case .ready(let grant, let userId) = reached else {
            if case .unavailable(let response) = reached { return response }
            return .error(503, "unavailable", "the bucket cannot be reached now")
        }
        let key = "photos/\(userId)/\(md5).dat"
        let ranged = RangePlan(size: expectedSize ?? 0, threshold: options.rangeThreshold, rangeSize: options.rangeSize).isRanged
        return .stream { writer in
            if ranged {
                await self.relayRanges(key: key, userId: userId, grant: grant, writer: writer)
            } else {
                await self.relayWhole(key: key, userId: userId, grant: grant, writer: writer)
            }
        }
    }

    private func relayWhole(key: String, userId: String, grant: STSGrant, writer: ControlStreamWriter) async {
        let relayed = Relayed()
        var grant = grant
        var attempt = 0
        var refreshed = false
        let bandwidth = self.bandwidth
        let meter = self.meter
        while true {
            let outcome: S3Error?
            do throws(S3Error) {
                let (client, credentials) = try client(grant, prefix: "photos/\(userId)/")
                let from = relayed.sent
                let range: ClosedRange<Int64>? = relayed.begun && from > 0 ? from...(relayed.total - 1) : nil
                _ = try await client.getObject(key: key, range: range, expectedBytes: relayed.total - from, credentials: credentials, onHead: { head in
                    guard !relayed.begun else { return }
                    relayed.begin(head.objectSize)
                    try await writer.begin(contentType: "application/octet-stream", contentLength: head.objectSize)
                }, consume: { buffer in
                    await bandwidth.take(buffer.readableBytes)
                    try await writer.write(buffer)
                    relayed.add(buffer.readableBytes)
                    meter.add(Int64(buffer.readableBytes))
                })
                outcome = nil
            } catch {
                outcome = error
            }
            guard let error = outcome, !(relayed.begun && relayed.sent >= relayed.total) else {
                if !relayed.begun { try? await writer.begin(contentType: "application/octet-stream", contentLength: 0) }
                try? await writer.finish()
                return
            }
            if error.kind == .localFile { return }   // the command went away
            if !relayed.begun, let answer = Self.refusal(error, key: key) {
                await writer.respond(answer)
                return
            }
            guard await shouldRetry(error, grant: grant, attempt: &attempt, refreshed: &refreshed) else {
                if !relayed.begun { await writer.respond(.error(502, "storage_error", "could not read \(key): \(error)")) }
                logger.warning("an object could not be relayed whole", metadata: ["key": "\(key)", "error": "\(error)"])
                return
            }
            if refreshed, let fresh = try? await account.credentials() { grant = fresh }
        }
    }

    private func relayRanges(key: String, userId: String, grant: STSGrant, writer: ControlStreamWriter) async {
        // The first range says how big the object is; then the rest, `parallelRanges` ahead.
        // A range's bytes count against the shared budget from before it is fetched until
        // they are written to the command.
        var held: [Int: Int64] = [0: await budget.acquire(options.rangeSize)]
        var tasks: [Int: Task<Result<(S3Client.ObjectHead, ByteBuffer), S3Error>, Never>] = [:]
        defer {
            for task in tasks.values { task.cancel() }
            let budget = self.budget
            let total = held.values.reduce(0, +)
            Task { await budget.release(total) }
        }
        let first = await fetchRange(key: key, userId: userId, range: 0...(options.rangeSize - 1), grant: grant)
        guard case .success(let (head, firstBytes)) = first else {
            if case .failure(let error) = first {
                await writer.respond(Self.refusal(error, key: key) ?? .error(502, "storage_error", "could not read \(key): \(error)"))
            }
            return
        }
        let plan = RangePlan(size: head.objectSize, threshold: 0, rangeSize: options.rangeSize)
        var next = 1
        do {
            try await writer.begin(contentType: "application/octet-stream", contentLength: head.objectSize)
            try await send(firstBytes, writer)
            await budget.release(held.removeValue(forKey: 0) ?? 0)
            for i in 1..<max(1, plan.ranges.count) {
                while next < plan.ranges.count && next < i + options.parallelRanges {
                    let range = plan.ranges[next]
                    held[next] = await budget.acquire(Int64(range.count))
                    tasks[next] = Task { await self.fetchRange(key: key, userId: userId, range: range, grant: grant) }
                    next += 1
                }
                guard let task = tasks.removeValue(forKey: i) else { break }
                guard case .success(let (_, bytes)) = await task.value else {
                    logger.warning("a range of an object could not be read; the command sees it cut short", metadata: ["key": "\(key)"])
                    return
                }
                try await send(bytes, writer)
                await budget.release(held.removeValue(forKey: i) ?? 0)
            }
            try await writer.finish()
        } catch {
            logger.info("a ranged relay stopped: \(error)", metadata: ["key": "\(key)"])
        }
    }

    /// One range into memory, retried under the uploads' rule.
    private func fetchRange(key: String, userId: String, range: ClosedRange<Int64>, grant: STSGrant) async -> Result<(S3Client.ObjectHead, ByteBuffer), S3Error> {
        var grant = grant
        var attempt = 0
        var refreshed = false
        let meter = self.meter
        while true {
            let collected = Mutex(ByteBuffer())
            do {
                let (client, credentials) = try client(grant, prefix: "photos/\(userId)/")
                let head = try await client.getObject(key: key, range: range, credentials: credentials) { buffer in
                    var b = buffer
                    collected.withLock { _ = $0.writeBuffer(&b) }
                    meter.add(Int64(buffer.readableBytes))
                }
                return .success((head, collected.withLock { $0 }))
            } catch {
                if Task.isCancelled { return .failure(error) }
                guard await shouldRetry(error, grant: grant, attempt: &attempt, refreshed: &refreshed) else { return .failure(error) }
                if refreshed, let fresh = try? await account.credentials() { grant = fresh }
            }
        }
    }

    private func send(_ bytes: ByteBuffer, _ writer: ControlStreamWriter) async throws {
        var rest = bytes
        while rest.readableBytes > 0, let piece = rest.readSlice(length: min(rest.readableBytes, 256 << 10)) {
            await bandwidth.take(piece.readableBytes)
            try await writer.write(piece)
        }
    }

    /// An answer the command can act on, for failures before the first byte.
    private static func refusal(_ error: S3Error, key: String) -> ControlResponse? {
        if error.code == "InvalidObjectState" {
            return .error(409, "archived", "\(key) is in an archive class and must be asked back first")
        }
        if error.kind == .notFound {
            return .error(404, "missing", "\(key) is not in the bucket")
        }
        return nil
    }

    // MARK: the bucket

    /// Why the bucket cannot be reached now, in words for the command; nil when it can.
    private enum Access {
        case ready(grant: STSGrant, userId: String)
        case unavailable(ControlResponse)
    }

    private func access() async -> Access {
        guard let userId = await account.userId else {
            return .unavailable(.error(409, "not_signed_in", "this NAS is not signed in: run `photolalactl login` first (with the Apple ID the devices were backed up with)"))
        }
        do {
            return .ready(grant: try await account.credentials(), userId: userId)
        } catch {
            let why: String
            switch error {
            case .signedOut: why = "this NAS is not signed in: run `photolalactl login`"
            case .paused(let reason): why = "the bucket cannot be reached now: \(reason.explanation)"
            case .cancelled: why = "photolalad is stopping"
            }
            return .unavailable(.error(503, "unavailable", why))
        }
    }

    private func client(_ grant: STSGrant, prefix: String) throws(S3Error) -> (S3Client, S3Credentials) {
        let client = try S3Client(configuration: grant.s3Configuration(keyPrefix: prefix, trust: options.trust),
                                  httpClient: http, clockOffset: clockOffset, logger: logger)
        return (client, grant.s3Credentials)
    }

    private func objects(_ grant: STSGrant, userId: String) throws(S3Error) -> BucketManifestObjects {
        let (client, credentials) = try client(grant, prefix: ManifestKeys.userPrefix(userId))
        return BucketManifestObjects(client: client, credentials: credentials)
    }

    /// The uploader's rule for a failed request: refresh refused credentials once, correct
    /// the clock once, retry transient failures with its backoff; anything else is final.
    /// Returns whether to try again.
    private func shouldRetry(_ error: S3Error, grant: STSGrant, attempt: inout Int, refreshed: inout Bool) async -> Bool {
        switch policy.action(for: error, credentialRetries: refreshed ? 1 : 0, skewRetries: 0) {
        case .refreshCredentials:
            refreshed = true
            await account.rejectedByS3(grant)
            return true
        case .correctClock:
            if let offset = error.clockOffset() { clockOffset = offset }
            return true
        case .retry:
            attempt += 1
            guard attempt <= 4 else { return false }
            let wait = policy.objectDelay(attempts: attempt, random: .random(in: 0..<1)) / 4
            try? await Task.sleep(for: .milliseconds(Int64(max(0.2, wait) * 1000)))
            return !Task.isCancelled
        default:
            return false
        }
    }

    // MARK: sessions, for status

    package func report(_ r: RestoreReport) -> String {
        sessions.update(r, now: Date())
    }

    package func contribute(to s: inout DaemonStatus) {
        s.restore = sessions.current(now: Date(), rate: meter.rate())
    }
}

/// What a relay has sent, shared with the S3 client's callbacks.
private final class Relayed: Sendable {
    private let state = Mutex<(begun: Bool, total: Int64, sent: Int64)>((false, 0, 0))
    var begun: Bool { state.withLock { $0.begun } }
    var sent: Int64 { state.withLock { $0.sent } }
    var total: Int64 { state.withLock { $0.total } }
    func begin(_ total: Int64) { state.withLock { $0 = (true, total, $0.sent) } }
    func add(_ n: Int) { state.withLock { $0.sent += Int64(n) } }
}

/// A device's manifest objects, read with the daemon's credentials.
private struct BucketManifestObjects: ManifestObjects {
    let client: S3Client
    let credentials: S3Credentials

    func keys(under prefix: String) async throws(S3Error) -> [String] {
        var keys: [String] = []
        var token: String?
        repeat {
            let page = try await client.listObjects(prefix: prefix, continuationToken: token, credentials: credentials)
            keys += page.objects.map(\.key)
            token = page.nextContinuationToken
        } while token != nil
        return keys
    }

    func bytes(_ key: String) async throws(S3Error) -> [UInt8]? {
        try await client.getObjectIfPresent(key: key, credentials: credentials)?.bytes
    }
}

/// How an object is read: whole in one GET when small, or as consecutive ranges of
/// `rangeSize` (the last shorter) read several at a time and relayed in order.
struct RangePlan: Sendable, Equatable {
    let ranges: [ClosedRange<Int64>]

    init(size: Int64, threshold: Int64, rangeSize: Int64) {
        guard size > threshold, rangeSize > 0 else {
            ranges = size > 0 ? [0...(size - 1)] : []
            return
        }
        var out: [ClosedRange<Int64>] = []
        var start: Int64 = 0
        while start < size {
            let end = min(size, start + rangeSize) - 1
            out.append(start...end)
            start = end + 1
        }
        ranges = out
    }

    var isRanged: Bool { ranges.count > 1 }
}
