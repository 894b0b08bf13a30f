/// RestoreRelay: the daemon's side of `devices` and `restore`: devices listed, manifests
/// opened and checked, objects read back with the daemon's credentials and relayed to
/// `photolalactl`, whose own side (`RestoreCtl`) plans and writes the files.
import Bucket
import Control
import Foundation
import Logging
import ManifestFormat
import NIOCore
import PhotolalaCore
import RestoreWire
import ServiceLifecycle
import Synchronization
import Vault

/// The network side of `photolalactl restore`: lists the account's devices, reads a
/// device's manifest, asks objects back from archive classes and relays objects to the
/// command, read with ranged, parallel GETs under the bandwidth limit, through its own
/// bucket session (4 transient retries in place). The command never sees a credential
/// nor a key: it gets bytes. The daemon opens encrypted manifests with the account's key,
/// checks them (authenticity, the chain, freshness against the heads it remembers) and
/// hands over their plaintext, which the command reads again as untrusted input.
package actor RestoreService: Service {
    private let session: BucketSession
    /// The account's metadata key (nil: this NAS never holds one, as in some tests).
    private let keySource: (any MetadataKeySource)?
    /// The newest device record and head seen of each device (the queue database).
    private let heads: (any ManifestHeadMemory)?
    private let clock: any DaemonClock
    private let logger: Logger
    private var options: Options
    private let bandwidth: TokenBucket
    private let budget: ByteBudget
    private let meter = RateMeter()
    private var sessions = RestoreSessions()
    /// Who restored what, where to, and how it ended (cli.md "audit": `restore`).
    private let audit: (any AuditRecorder)?
    /// Devices whose manifest was refused (a downgrade, a rollback): status, the trail, a
    /// notification (shared with the manifest stage).
    private let alarms: ManifestAlarms?

    /// - Parameter bucket: the way to the bucket; the signed-in user and this NAS's device
    ///   id come from its grant source.
    package init(bucket session: BucketSession, keys: (any MetadataKeySource)? = nil, heads: (any ManifestHeadMemory)? = nil,
                 options: Options, clock: any DaemonClock = SystemClock(), logger: Logger, audit: (any AuditRecorder)? = nil,
                 alarms: ManifestAlarms? = nil) {
        self.session = session
        self.audit = audit
        self.alarms = alarms
        self.keySource = keys
        self.heads = heads
        self.options = options
        self.clock = clock
        self.logger = logger
        bandwidth = TokenBucket(bytesPerSecond: options.bandwidthLimit)
        budget = ByteBudget(capacity: options.bufferBudget)
    }

    package func apply(_ new: Options) async {
        options = new
        await bandwidth.setRate(new.bandwidthLimit)
        await session.apply(trust: new.trust)
    }

    package func run() async throws {
        try? await gracefulShutdown()
        await session.shutdown()
    }

    /// The calls of `photolalactl devices` and `restore` on the control socket.
    package func answer(_ request: ControlRequest) async -> ControlResponse {
        switch request.route {
        case .devices:
            let response = await devices()
            // A member of the socket group sees only the names below folders it could list
            // (privacy.md "No side doors"), the way its manifest is shown.
            guard !request.privileged, response.status == 200,
                  let list = try? ControlJSON.decode(DeviceList.self, from: response.body) else { return response }
            var check = ListingCheck(caller: request.peer.accessCaller)
            return .json(list.seen(mayName: { check.mayName($0) }))
        case .manifest:
            let device = request.query["device"] ?? ""
            var names: SharedListingCheck?
            if !request.privileged {
                // A member of the socket group: this NAS's manifest only, and only the names
                // below folders it could list (privacy.md "No side doors").
                guard device == (await session.deviceId) else {
                    return .error(403, "forbidden", "permission denied: other devices' manifests (their names and folders) are for root and the daemon's user only (try sudo photolalactl restore --dry-run)")
                }
                names = SharedListingCheck(caller: request.peer.accessCaller)
            }
            return await manifest(device: device, allowUnencrypted: request.query["allowUnencrypted"] == "1", names: names)
        case .restoreObjects, .restoreThaw:
            guard let query = try? ControlJSON.decode(ObjectQuery.self, from: request.body) else {
                return .error(400, "bad_request", "expected {\"md5s\": [...]}")
            }
            return await objects(query, thaw: request.route == .restoreThaw)
        case .restoreListing:
            return await listing()
        case .restoreObject:
            return await object(md5: request.query["md5"] ?? "", expectedSize: request.query["size"].flatMap { Int64($0) }, by: request.caller)
        case .restoreSession:
            guard let report = try? ControlJSON.decode(RestoreReport.self, from: request.body) else {
                return .error(400, "bad_request", "expected a restore report")
            }
            return .json(RestoreSessionReply(id: self.report(report, by: request.caller)))
        case .restoreExport:
            switch await access() {
            case .success(let userId):
                return PhotoExport(session: session, userId: userId, budget: options.budget, directory: options.scratchDirectory,
                                   concurrency: options.headConcurrency, logger: logger).listing()
            case .failure(let refusal): return refusal.response
            }
        case .restoreExportReport:
            return PhotoExport.record(request, audit: audit)
        default:
            return .error(404, "not_found", "not a restore call")
        }
    }

    // MARK: devices and their manifests, as the bucket holds them

    /// `photolalactl devices`: every device with a manifest under this account, this NAS
    /// first (`DeviceListing` decides each row from the bytes fetched here).
    package func devices() async -> ControlResponse {
        let userId: String
        switch await access() {
        case .success(let id): userId = id
        case .failure(let refusal): return refusal.response
        }
        do {
            let store = ManifestReads(session: session, userId: userId, budget: options.budget)
            let listed = try await store.listing(under: ManifestKeys.devicesPrefix(userId))
            let found = DeviceListing(listed, userId: userId)
            let current = await session.deviceId
            let keyState = await keySource?.metadataKeyState() ?? .needed
            let vouches = await Self.vouches(store, userId: userId, listing: listed.map(\.key), keyState: keyState)
            var list: [DeviceList.Device] = []
            for (id, seen) in found.seen {
                let layout = ManifestKeys(userId: userId, deviceId: id)
                let bytes = seen.record ? try await store.bytes(layout.record) : nil
                let row = DeviceListing.row(id, seen, current: id == current, record: bytes, recordKey: layout.record, keyState: keyState)
                var device = row.device
                if device.access == .unencrypted,
                   let trace = vouches.formatTwoTrace(of: id, listing: listed.map(\.key), remembered: await heads?.remembered(userId: userId, device: id), userId: userId) {
                    // Not under the attacker's name: only the id, and why it is refused.
                    device = DeviceListing.downgraded(id, seen, current: id == current, trace: trace)
                    await raiseDowngrade(id, trace: trace)
                } else if device.access == .readable {
                    // Its sealed record opens again (its NAS wrote it back): no longer a downgrade.
                    await alarms?.clear(device: id, kind: .downgrade)
                }
                if let counter = row.counter, let seenBefore = await heads?.remembered(userId: userId, device: id), seenBefore.counter > counter {
                    device.problem = DeviceListing.rolledBack
                }
                list.append(device)
            }
            return .json(DeviceList(devices: DeviceListing.sorted(list), note: DeviceListing.note(list, keyState: keyState)))
        } catch {
            return Refusal(error)?.response
                ?? .error(502, "storage_error", "could not list the devices in the bucket: \(error)")
        }
    }

    /// `GET /v1/manifest?device=ID[&allowUnencrypted=1]`: the device's manifest segments,
    /// checked, then a report (see `ManifestFrames`). An encrypted manifest needs the
    /// account's key; a plaintext one is sent only when the user allowed it.
    /// `names`: for a member of the socket group, which names it may be sent; each segment
    /// then goes without the records of the others (decoded, filtered, encoded again).
    package func manifest(device: String, allowUnencrypted: Bool = false, names: SharedListingCheck? = nil) async -> ControlResponse {
        guard Self.isDeviceId(device) else {
            return .error(400, "bad_request", "device must be a device id (photolalactl devices lists them)")
        }
        let userId: String
        switch await access() {
        case .success(let id): userId = id
        case .failure(let refusal): return refusal.response
        }
        let store = ManifestReads(session: session, userId: userId, budget: options.budget)
        let layout = ManifestKeys(userId: userId, deviceId: device)
        let format: Int
        let recordBytes: [UInt8]?
        do {
            recordBytes = try await store.bytes(layout.record)
            if let f = recordBytes.flatMap(DeviceRecord.format(of:)) {
                format = f
            } else {
                let keys = try await store.keys(under: layout.prefix)
                format = keys.contains { $0.hasSuffix(".pls") } || keys.isEmpty ? ManifestSegment.sealedFormat : ManifestSegment.formatVersion
            }
        } catch {
            return (error as? S3Error).flatMap { Refusal($0) }?.response
                ?? .error(502, "storage_error", "could not read the manifest of \(device): \(error)")
        }
        let reader: ManifestReader
        switch format {
        case ManifestSegment.sealedFormat:
            let state = await keySource?.metadataKeyState() ?? .needed
            guard case .ready(let accountKey) = state else {
                if case .unreadable(let why) = state {
                    return .error(409, "recovery_key_unreadable", "the manifest of device \(device) is encrypted, and this account's key cannot be read: \(why)")
                }
                return .error(409, "recovery_key_needed",
                              "the manifest of device \(device) is encrypted with this account's key, which this NAS does not hold yet: enter the account's recovery key (\(DeviceListing.enterHint)), then run the restore again")
            }
            let key = accountKey.metadataKey
            // A record that does not open names the device as unreadable; without one the
            // reader says what it can of the segments.
            if let recordBytes, (try? DeviceRecord.open(recordBytes, key: key, objectKey: layout.record)) == nil {
                return .error(409, "unreadable", DeviceListing.notReadable(device))
            }
            // Freshness without memory: the newest head any other device's record vouches for.
            var freshness = ManifestReader.Freshness()
            do {
                let listing = try await store.listing(under: ManifestKeys.devicesPrefix(userId)).map(\.key)
                if let floor = await ManifestVouches.read(store, userId: userId, listing: listing, key: key).floor(for: device) {
                    freshness = ManifestReader.Freshness(floor: floor.head, floorBy: floor.by)
                }
            } catch {
                return Refusal(error)?.response ?? .error(502, "storage_error", "could not read the manifest of \(device): \(error)")
            }
            reader = ManifestReader(store: store, keys: layout, key: key, remembered: await heads?.remembered(userId: userId, device: device),
                                    freshness: freshness)
        case ManifestSegment.formatVersion:
            // A device sealed for good is never read in plaintext, --allow-unencrypted or not.
            do {
                let listing = try await store.listing(under: ManifestKeys.devicesPrefix(userId)).map(\.key)
                let vouches = await Self.vouches(store, userId: userId, listing: listing, keyState: await keySource?.metadataKeyState() ?? .needed)
                if let trace = vouches.formatTwoTrace(of: device, listing: listing, remembered: await heads?.remembered(userId: userId, device: device),
                                                      userId: userId) {
                    await raiseDowngrade(device, trace: trace)
                    return .error(409, "downgraded", DeviceListing.downgradedSentence(device, trace: trace))
                }
            } catch {
                return Refusal(error)?.response ?? .error(502, "storage_error", "could not read the manifest of \(device): \(error)")
            }
            guard allowUnencrypted else {
                return .error(409, "unencrypted",
                              "the manifest of device \(device) is in the old plaintext format, which nothing authenticates: restore from it only with --allow-unencrypted (every restore rule still applies)")
            }
            reader = ManifestReader(store: store, keys: layout.plaintext)
        default:
            return .error(409, "newer_format", "the manifest of device \(device) is in format \(format), newer than this photolalad reads: update photolalad")
        }
        let (logger, heads) = (self.logger, self.heads)
        let sealed = format == ManifestSegment.sealedFormat
        return .stream { writer in
            do {
                try await writer.begin(contentType: "application/octet-stream", contentLength: nil)
                var report = try await reader.read { _, bytes in
                    let shown = names.map { Self.only(bytes, sealed: sealed, mayName: $0.mayName) } ?? bytes
                    try await writer.write(sealed ? ManifestFrames.plaintext(shown) : ManifestFrames.segment(shown))
                }
                if report.segments == 0 && report.problems.isEmpty { report.problems.append("no manifest for device \(device)") }
                if report.replayed || report.belowFloor, let why = report.problems.last {
                    await self.raiseRollback(device, why: why)
                } else if sealed, report.complete {
                    await self.alarms?.clear(device: device)
                }
                if let head = report.head { await heads?.remember(userId: userId, device: device, head) }
                try await writer.write(ManifestFrames.report(report))
                try await writer.finish()
            } catch {
                // Cut off without a report: the command takes it for an error.
                logger.warning("a manifest could not be sent whole: \(error)")
            }
        }
    }

    private func raiseDowngrade(_ device: String, trace: String) async {
        logger.error("a downgraded manifest was refused", metadata: ["device": "\(device)", "trace": "\(trace)"])
        await alarms?.raise(device: device, kind: .downgrade, message: DeviceListing.downgradedSentence(device, trace: trace),
                            action: "restore from another device, or let the NAS of device \(device) run: it writes its sealed manifest again")
    }

    private func raiseRollback(_ device: String, why: String) async {
        logger.error("a manifest below what the account vouches for", metadata: ["device": "\(device)", "why": "\(why)"])
        await alarms?.raise(device: device, kind: .rollback, message: "The manifest of device \(device) was rolled back in the bucket: \(why)",
                            action: "restore with --as-of before the gap, or from another device")
    }

    // MARK: where objects stand (HEAD), and asking archived ones back (`RestoreObject`)

    /// One status per MD5 asked; `thaw` also asks every archived one back.
    package func objects(_ query: ObjectQuery, thaw: Bool) async -> ControlResponse {
        guard query.md5s.count <= ObjectQuery.maxBatch else {
            return .error(400, "bad_request", "at most \(ObjectQuery.maxBatch) objects a call")
        }
        guard query.md5s.allSatisfy(Self.isMD5) else { return .error(400, "bad_request", "md5s must be 32 lowercase hex digits") }
        let userId: String
        switch await access() {
        case .success(let id): userId = id
        case .failure(let refusal): return refusal.response
        }
        let limit = options.headConcurrency
        let statuses = await withTaskGroup(of: (Int, ObjectStatus).self) { group in
            var out = [ObjectStatus?](repeating: nil, count: query.md5s.count)
            var next = 0
            func launch() {
                guard next < query.md5s.count else { return }
                let (i, md5) = (next, query.md5s[next])
                next += 1
                group.addTask { (i, await self.status(of: md5, userId: userId, thaw: thaw)) }
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

    private func status(of md5: String, userId: String, thaw: Bool) async -> ObjectStatus {
        let key = "photos/\(userId)/\(md5).dat"
        let days = options.thawDays
        do {
            let (status, asked) = try await session.perform(under: Self.photos(userId), budget: options.budget) { bucket throws(S3Error) in
                guard let info = try await bucket.headObject(key: key) else { return (ObjectStatus(md5: md5, state: .missing), false) }
                let storageClass = info.storageClass ?? "STANDARD"
                guard info.needsRestore else { return (ObjectStatus(md5: md5, state: .ready, size: info.size, storageClass: storageClass), false) }
                if info.restore == .inProgress {
                    return (ObjectStatus(md5: md5, state: .restoring, size: info.size, storageClass: storageClass), false)
                }
                guard thaw else { return (ObjectStatus(md5: md5, state: .archived, size: info.size, storageClass: storageClass), false) }
                switch try await bucket.restoreObject(key: key, days: days) {
                case .available: return (ObjectStatus(md5: md5, state: .ready, size: info.size, storageClass: storageClass), false)
                case .started, .inProgress: return (ObjectStatus(md5: md5, state: .restoring, size: info.size, storageClass: storageClass), true)
                }
            }
            if asked { logger.info("asked an archived object back", metadata: ["key": "\(key)", "class": "\(status.storageClass ?? "")"]) }
            return status
        } catch {
            return ObjectStatus(md5: md5, state: .unknown, message: error.description)
        }
    }

    /// `GET /v1/restore/listing`, for a restore that wants most of the bucket (one request
    /// per 1,000 objects instead of a HEAD per object): one line per object of
    /// `photos/{userId}/`, `md5 size storageClass`, streamed a page at a time (the daemon
    /// holds one page), then `end` on a line of its own.
    package func listing() async -> ControlResponse {
        let userId: String
        switch await access() {
        case .success(let id): userId = id
        case .failure(let refusal): return refusal.response
        }
        let prefix = Self.photos(userId)
        let (session, budget) = (self.session, options.budget)
        return .stream { writer in
            var token: String?
            var begun = false
            while true {
                let page: S3Client.ListPage
                do throws(S3Error) {
                    page = try await session.perform(under: prefix, budget: budget) { [token] bucket throws(S3Error) in
                        try await bucket.listObjects(prefix: prefix, continuationToken: token)
                    }
                } catch {
                    if !begun {
                        await writer.respond(Refusal(error)?.response ?? .error(502, "storage_error", "could not list \(prefix): \(error)"))
                    }
                    return
                }
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

    // MARK: relaying one object to the command: small ones in one streamed GET (resumed
    // from where it broke off if the connection drops), big ones as ranges read several at
    // a time and sent in order. Whatever goes wrong before the first byte is answered as
    // an error the command can show; after it, the body is cut short, which the command sees.

    /// `GET /v1/restore/object?md5=M&size=N` (N: the size the manifest gives, or for an
    /// export the listing's). An object of another size is refused before a byte of it is
    /// relayed (privacy.md "No side doors": sizes before bytes): a 50 KB entry whose
    /// object was swapped for 40 GB must not stream 40 GB into the NAS's data volume.
    package func object(md5: String, expectedSize: Int64?, by actor: AuditActor = .daemon) async -> ControlResponse {
        guard Self.isMD5(md5) else { return .error(400, "bad_request", "md5 must be 32 lowercase hex digits") }
        let userId: String
        switch await access() {
        case .success(let id): userId = id
        case .failure(let refusal): return refusal.response
        }
        let key = "photos/\(userId)/\(md5).dat"
        let ranged = RangePlan(size: expectedSize ?? 0, threshold: options.rangeThreshold, rangeSize: options.rangeSize).isRanged
        let refuse: @Sendable (Int64) async -> ControlResponse = { found in
            await self.sizeRefused(md5: md5, found: found, expected: expectedSize ?? 0, by: actor)
        }
        return .stream { writer in
            if ranged {
                await self.relayRanges(key: key, prefix: Self.photos(userId), expectedSize: expectedSize, refuse: refuse, writer: writer)
            } else {
                await self.relayWhole(key: key, prefix: Self.photos(userId), expectedSize: expectedSize, refuse: refuse, writer: writer)
            }
        }
    }

    /// The answer to an object whose size is not the one asked for: 422, one sentence
    /// naming the object, and a `restore` record `refused` in the trail.
    private func sizeRefused(md5: String, found: Int64, expected: Int64, by actor: AuditActor) -> ControlResponse {
        logger.warning("an object's size is not the manifest's: refused before a byte was relayed",
                       metadata: ["md5": "\(md5)", "size": "\(found)", "expected": "\(expected)"])
        audit?.record(AuditEvent(.restore, by: actor, .refused, ["step": "object", "md5": .string(md5), "size": .int(found),
                                                                 "expected": .int(expected), "why": "size"]))
        return Self.sizeMismatch(md5: md5, found: found, expected: expected)
    }

    /// One GET streamed to the command; a transient failure resumes from the byte where
    /// it broke off (the session tries the operation again, which asks for the rest). The
    /// answer's head is checked against `expectedSize` before its body is read.
    private func relayWhole(key: String, prefix: String, expectedSize: Int64?, refuse: @Sendable (Int64) async -> ControlResponse,
                            writer: ControlStreamWriter) async {
        let relayed = Relayed()
        let (bandwidth, meter) = (self.bandwidth, self.meter)
        do throws(S3Error) {
            try await session.perform(under: prefix, budget: options.budget) { bucket throws(S3Error) in
                let from = relayed.sent
                guard !(relayed.begun && from >= relayed.total) else { return }
                let range: ClosedRange<Int64>? = relayed.begun && from > 0 ? from...(relayed.total - 1) : nil
                _ = try await bucket.getObject(key: key, range: range, expectedBytes: relayed.total - from, onHead: { head in
                    if let expectedSize, head.objectSize != expectedSize {
                        relayed.refuse(head.objectSize)
                        throw SizeRefusal()
                    }
                    guard !relayed.begun else { return }
                    relayed.begin(head.objectSize)
                    try await writer.begin(contentType: "application/octet-stream", contentLength: head.objectSize)
                }, consume: { buffer in
                    await bandwidth.take(buffer.readableBytes)
                    try await writer.write(buffer)
                    relayed.add(buffer.readableBytes)
                    meter.add(Int64(buffer.readableBytes))
                })
            }
        } catch {
            if let found = relayed.refused {
                // Before the first byte: the command is told why. (A resumed GET finding
                // another size: the body is cut short, which the command sees.)
                if !relayed.begun { await writer.respond(await refuse(found)) }
                return
            }
            guard !(relayed.begun && relayed.sent >= relayed.total) else { return await Self.finish(writer, begun: true) }
            if error.kind == .localFile { return }   // the command went away
            if !relayed.begun, let refusal = Refusal(error, key: key) { return await writer.respond(refusal.response) }
            if !relayed.begun { await writer.respond(.error(502, "storage_error", "could not read \(key): \(error)")) }
            logger.warning("an object could not be relayed whole", metadata: ["key": "\(key)", "error": "\(error)"])
            return
        }
        await Self.finish(writer, begun: relayed.begun)
    }

    /// The first range says how big the object is; then the rest, `parallelRanges` ahead,
    /// each a child task, sent in order. A range's bytes count against the shared budget
    /// from before it is fetched until they are written to the command.
    private func relayRanges(key: String, prefix: String, expectedSize: Int64?, refuse: @Sendable (Int64) async -> ControlResponse,
                             writer: ControlStreamWriter) async {
        var held: [Int: Int64] = [0: await budget.acquire(options.rangeSize)]
        let first = await fetchRange(key: key, prefix: prefix, range: 0...(options.rangeSize - 1))
        guard case .success(let (head, firstBytes)) = first else {
            if case .failure(let error) = first {
                await writer.respond(Refusal(error, key: key)?.response ?? .error(502, "storage_error", "could not read \(key): \(error)"))
            }
            await budget.release(held.values.reduce(0, +))
            return
        }
        if let expectedSize, head.objectSize != expectedSize {
            await writer.respond(await refuse(head.objectSize))
            await budget.release(held.values.reduce(0, +))
            return
        }
        let plan = RangePlan(size: head.objectSize, threshold: 0, rangeSize: options.rangeSize)
        let parallel = options.parallelRanges
        do {
            try await writer.begin(contentType: "application/octet-stream", contentLength: head.objectSize)
            try await send(firstBytes, writer)
            await budget.release(held.removeValue(forKey: 0) ?? 0)
            try await withThrowingTaskGroup(of: (Int, Result<ByteBuffer, S3Error>).self) { group in
                var next = 1
                var arrived: [Int: Result<ByteBuffer, S3Error>] = [:]
                for i in 1..<max(1, plan.ranges.count) {
                    while next < plan.ranges.count && next < i + parallel {
                        let (n, range) = (next, plan.ranges[next])
                        held[n] = await budget.acquire(Int64(range.count))
                        group.addTask { (n, await self.fetchRange(key: key, prefix: prefix, range: range).map { $0.1 }) }
                        next += 1
                    }
                    while arrived[i] == nil, let (n, result) = try await group.next() { arrived[n] = result }
                    guard case .success(let bytes) = arrived.removeValue(forKey: i) else {
                        logger.warning("a range of an object could not be read; the command sees it cut short", metadata: ["key": "\(key)"])
                        group.cancelAll()
                        return
                    }
                    try await send(bytes, writer)
                    await budget.release(held.removeValue(forKey: i) ?? 0)
                }
                try await writer.finish()
            }
        } catch {
            logger.info("a ranged relay stopped: \(error)", metadata: ["key": "\(key)"])
        }
        await budget.release(held.values.reduce(0, +))
    }

    /// One range into memory.
    private func fetchRange(key: String, prefix: String, range: ClosedRange<Int64>) async -> Result<(S3Client.ObjectHead, ByteBuffer), S3Error> {
        let meter = self.meter
        do {
            return .success(try await session.perform(under: prefix, budget: options.budget) { bucket throws(S3Error) in
                // Each try starts the range over.
                let collected = Mutex(ByteBuffer())
                let head = try await bucket.getObject(key: key, range: range) { buffer in
                    var b = buffer
                    collected.withLock { _ = $0.writeBuffer(&b) }
                    meter.add(Int64(buffer.readableBytes))
                }
                return (head, collected.withLock { $0 })
            })
        } catch {
            return .failure(error)
        }
    }

    private func send(_ bytes: ByteBuffer, _ writer: ControlStreamWriter) async throws {
        var rest = bytes
        while rest.readableBytes > 0, let piece = rest.readSlice(length: min(rest.readableBytes, 256 << 10)) {
            await bandwidth.take(piece.readableBytes)
            try await writer.write(piece)
        }
    }

    // MARK: the bucket

    /// The signed-in user, once a grant is in hand; or why the bucket cannot be reached,
    /// in words for the command.
    private func access() async -> Result<String, Refusal> {
        guard let userId = await session.userId else { return .failure(.notSignedIn) }
        do {
            // No request: only the grant, so a paused account is told before a stream begins.
            try await session.perform(under: Self.photos(userId)) { _ throws(S3Error) in }
        } catch {
            return .failure(Refusal(error) ?? .unavailable("the bucket cannot be reached now: \(error)"))
        }
        return .success(userId)
    }

    // MARK: sessions, for status

    /// A restore's report; its opening and its end are recorded as `actor`'s (the command's
    /// caller: root or the daemon's user, the only ones who may open a session).
    package func report(_ r: RestoreReport, by actor: AuditActor = .daemon) -> String {
        let before = sessions.report(r.id)
        let id = sessions.update(r, now: clock.now())
        // The session's report: the opening's device, destination and time with this one's progress.
        let r = sessions.report(id) ?? r
        // An export (`restore --by-date`) records its own start and end, with what it wrote.
        guard r.device != RestoreReport.exportDevice else { return id }
        var details = Self.auditDetails(r)
        if before == nil {
            if let paths = r.paths, paths > 0 { details["paths"] = .int(Int64(paths)) }
            details["step"] = "started"
            logger.notice("a restore began", metadata: ["device": "\(r.device)", "to": "\(r.to ?? "original folders")"])
            audit?.record(AuditEvent(.restore, by: actor, .ok, details))
        }
        if r.finished && before?.finished != true {
            let o = r.outcome ?? RestoreReport.Outcome()
            let whole = Self.finished(o, files: r.filesTotal, into: &details)
            logger.notice("a restore ended", metadata: ["device": "\(r.device)", "restored": "\(o.restored)", "failed": "\(o.failed)"])
            audit?.record(AuditEvent(.restore, by: actor, whole ? .ok : .failed, details))
        }
        return id
    }

    package func contribute(to s: inout DaemonStatus) {
        s.restore = sessions.current(now: clock.now(), rate: meter.rate())
    }
}
