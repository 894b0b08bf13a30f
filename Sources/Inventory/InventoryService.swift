/// Inventory: what the bucket holds, from listing it (s3-layout.md, "Knowing what is already there"), and `verify`.
import Bucket
import Digests
import Foundation
import Logging
import NIOCore
import PhotolalaCore
import Queue
import ServiceLifecycle
import Synchronization

/// Lists `photos/{userId}/` and `thumbnails/{userId}/` (1,000 keys a page, one
/// transaction per page, nothing held beyond a page) after a sign-in, every
/// `upload.inventory_interval` and on `photolalactl verify`, into the queue's `inventory`
/// table. It never calls another stage: each page marks the objects waiting to be sent
/// that the bucket already holds (`uploaded` wakes the stages after the upload), the end
/// of a complete listing puts back in the queue what the bucket lost (`readyToUpload`),
/// and the listing's state in the queue is what the uploader reads to know whether it
/// may trust "not listed" (`inventoryChanged` wakes it).
///
/// `verify` is a fresh listing compared with every object the daemon holds as backed up
/// (presence, size, ETag), then with `--deep` a share of them read back through an MD5.
/// The decisions are values: `InventorySchedule`, `ObjectCheck`, `ListingReconciliation`.
package actor InventoryService: Service, Stage {
    package struct Options: Sendable, Equatable {
        package var interval: Duration
        /// Objects `verify --deep` reads back at once.
        package var readBackConcurrency: Int
        /// The system's CAs plus `tls.ca_file`, as for the uploads.
        package var trust: TLSTrust

        /// The one mapping from settings, at start and on reload.
        package init(_ settings: Settings) {
            interval = settings.upload.inventoryInterval
            readBackConcurrency = max(1, min(8, settings.upload.concurrency))
            trust = TLSTrust(caFile: settings.tls.caFile)
        }
    }

    /// A pass's end.
    private enum PassOutcome: Sendable, Equatable {
        case complete(startedAt: Date)
        /// S3 answered 403: the session policy does not allow listing.
        case refused(String)
        case failed(String)
        /// Signed out, paused by the account, or stopping.
        case interrupted
    }

    /// One object read back.
    private enum ReadBack: Sendable, Equatable {
        case same
        case different
        case missing
        case unreadable(String)
    }

    /// A request gave up without an S3 answer to show: signed out, paused, or stopping.
    private struct Interrupted: Error {}

    /// Listing and reading are idempotent: an answer cut short is asked again, 4 times
    /// within 0.2–4 s.
    private static let budget = BucketBudget(transientRetries: 4, backoff: Backoff(base: 0.5, cap: 4, jitter: .full, floor: 0.2),
                                             repeatsUnreadableAnswers: true)
    private static let lastVerifyKey = "verify.last"

    /// The queue, clock, log, status feed and audit trail (`Stage` reads them through it).
    package nonisolated let context: StageContext
    private let bucket: BucketSession
    private let gate: any StageGate
    private var options: Options
    private let schedule: InventorySchedule
    /// A `verify` asked for and not begun yet: the share to read back (0: none).
    private var verifyAsked: Double?
    /// The verify under way, or the last one (its result is also kept in the queue's
    /// `setting` table, so status shows it after a restart).
    private var verify = VerifyProgress()
    private var passRunning = false
    /// The passes under way by prefix: a pass after a complete one keeps its progress here
    /// rather than in the queue database.
    private var running: [String: ListingPass] = [:]
    /// When the last pass of a prefix ended, for a pass that found nothing new and so
    /// recorded nothing (issue 25: disks left asleep). Lost on a restart, which lists again.
    private var quietlyListedAt: [String: Date] = [:]
    private var loop: StageLoop?
    /// Who asked for the verify asked for or under way (its result is recorded as theirs).
    private var verifyActor: AuditActor = .daemon

    /// - Parameters:
    ///   - bucket: the stage's session.
    ///   - gate: whether the account lets the daemon use the bucket (signed in, not paused
    ///     by the account; the user's own pause does not stop listing).
    package init(context: StageContext, bucket: BucketSession, gate: any StageGate, options: Options,
                 schedule: InventorySchedule = InventorySchedule()) async {
        self.context = context
        self.bucket = bucket
        self.gate = gate
        self.options = options
        self.schedule = schedule
        if let saved = try? await database.setting(Self.lastVerifyKey),
           let result = try? JSONDecoder().decode(DaemonStatus.Verify.self, from: Data(saved.utf8)) {
            verify.result = result
        }
    }

    package func apply(_ new: Options) async {
        guard new != options else { return }
        options = new
        await bucket.apply(trust: new.trust)
        loop?.wake()
    }

    private static func photosPrefix(_ userId: String) -> String { "photos/\(userId)/" }
    private static func thumbnailsPrefix(_ userId: String) -> String { "thumbnails/\(userId)/" }

    package func run() async throws {
        // A sign-in, a logout or a pause lifted shows as a change of the gate.
        let loop = StageLoop(clock: clock, wakes: [.stream(gate.changes())])
        self.loop = loop
        // A stop does not wait for the rest of a long listing: it starts over next time.
        await loop.run { _ in await self.step() }
        await bucket.shutdown()
    }

    private func step() async -> StageLoop.Next {
        guard let userId = await bucket.userId, await gate.blockReason() == nil else {
            if verifyAsked != nil { await finishVerify(failure: "photolalad is not signed in (or uploads are paused by the account): run `photolalactl status`") }
            return .wake
        }
        let now = clock.now()
        let photos = await listing(Self.photosPrefix(userId))
        let due = verifyAsked != nil ? now
            : schedule.nextListing(photos: photos, interval: Units.seconds(options.interval), now: now, random: .random(in: 0..<1))
        guard due <= now else { return .wait(until: due) }
        if let deep = verifyAsked {
            verifyAsked = nil
            await runVerify(userId: userId, deepPercent: deep > 0 ? deep : nil)
            return .now
        }
        if case .complete = await listEverything(userId: userId, checkETags: false) { return .now }
        // A pass that could not record its end (a full disk) would be due again at once:
        // never more often than this.
        return .wait(until: clock.now().addingTimeInterval(5))
    }

    /// `photolalactl verify [--deep P]`: begins one (or answers the one under way). `by`:
    /// who asked, in the audit trail with the verify's start and its result.
    package func requestVerify(deepPercent: Double?, by actor: AuditActor = .daemon) async -> VerifyProgress {
        if !verify.isFinished { return verify }
        verifyAsked = deepPercent ?? 0
        verifyActor = actor
        var details: AuditDetails = ["step": "started"]
        if let deepPercent { details["deep"] = .string(Self.percent(deepPercent)) }
        audit?.record(AuditEvent(.verify, by: actor, .ok, details))
        verify = VerifyProgress(phase: .queued, startedAt: Timestamp.string(clock.now()),
                                result: DaemonStatus.Verify(running: true, deepPercent: deepPercent))
        statusChanges.changed()
        loop?.wake()
        return verify
    }

    package func verifyProgress() -> VerifyProgress { verify }

    // MARK: S3 requests

    /// `operation` under the one rule with the inventory's budget, limited to `prefix`.
    private func request<T: Sendable>(prefix: String,
                                      _ operation: @Sendable (any Bucket) async throws(S3Error) -> T) async throws -> T {
        let failure: S3Error
        do {
            return try await bucket.perform(under: prefix, budget: Self.budget, operation)
        } catch {
            failure = error
        }
        if failure.kind == .cancelled || failure.kind == .unavailable { throw Interrupted() }
        throw failure
    }

    // MARK: listing

    /// The periodic pass (and the first after a sign-in): the user's photos, with what
    /// they say about the objects the queue holds, then the thumbnails.
    @discardableResult
    private func listEverything(userId: String, checkETags: Bool) async -> PassOutcome {
        passRunning = true
        defer { passRunning = false }
        let outcome = await listPrefix(Self.photosPrefix(userId), userId: userId, matchObjects: true)
        if case .complete(let startedAt) = outcome {
            var found = DaemonStatus.Verify()
            do {
                try await compareUploaded(userId: userId, listingStartedAt: startedAt, checkETags: checkETags, into: &found)
                if found.missing + found.wrongSize > 0 {
                    logger.warning("the bucket lacks objects this NAS backed up: they are sent again", metadata: [
                        "missing": "\(found.missing)", "wrongSize": "\(found.wrongSize)", "queued": "\(found.requeued)",
                        "noFileLeft": "\(found.lost)"])
                }
            } catch {
                logger.error("cannot compare the listing with the queue: \(error)")
            }
        }
        await listPrefix(Self.thumbnailsPrefix(userId), userId: userId, matchObjects: false)
        return outcome
    }

    /// Lists `prefix` page by page, each page in its own transaction. `matchObjects`: the
    /// photos prefix, whose keys name the objects of the queue (`photos/U/{md5}.dat`).
    @discardableResult
    private func listPrefix(_ prefix: String, userId: String, matchObjects: Bool) async -> PassOutcome {
        let startedAt = clock.now()
        let keep = [Self.photosPrefix(userId), Self.thumbnailsPrefix(userId)]
        var pass: ListingPass
        do {
            pass = try await database.beginListing(prefix: prefix, keep: keep, now: startedAt)
        } catch {
            logger.error("cannot record a listing in the queue database: \(error)")
            return .failed("the queue database: \(error)")
        }
        running[prefix] = pass
        defer { running[prefix] = nil }
        statusChanges.changed()
        var token: String?
        var pages = 0
        var marked = 0
        do {
            repeat {
                let from = token
                let page = try await request(prefix: prefix) { bucket throws(S3Error) in
                    try await bucket.listObjects(prefix: prefix, continuationToken: from)
                }
                marked += try await database.recordListingPage(&pass, keys: page.objects, matchObjects: matchObjects, now: clock.now())
                running[prefix] = pass
                pages += 1
                if verify.phase == .listing && matchObjects { verify.done = pass.seen }
                token = page.nextContinuationToken
                statusChanges.changed()
            } while token != nil
            let now = clock.now()
            let (objects, removed, wrote) = try await database.finishListing(pass, now: now)
            // A pass that changed nothing wrote nothing: when it ended is known until a restart.
            quietlyListedAt[prefix] = wrote ? nil : now
            logger.info("listed the bucket", metadata: [
                "prefix": "\(prefix)", "objects": "\(objects)", "pages": "\(pages)", "gone": "\(removed)",
                "alreadyBackedUp": "\(marked)", "changed": "\(pass.changed)", "seconds": "\(String(format: "%.1f", now.timeIntervalSince(startedAt)))"])
            statusChanges.changed()
            return .complete(startedAt: startedAt)
        } catch is Interrupted {
            return .interrupted
        } catch let error as S3Error where error.kind == .forbidden {
            let why = "S3 refused to list \(prefix) (403 \(error.code)): the backend's session policy does not allow s3:ListBucket"
            logger.warning("\(why); uploads check each object with a HEAD instead")
            try? await database.listingFailed(prefix: prefix, refused: true, error: why, now: clock.now())
            statusChanges.changed()
            return .refused(why)
        } catch {
            let why = "listing \(prefix) failed after \(pages) page\(pages == 1 ? "" : "s"): \(error)"
            logger.warning("\(why); trying again later, uploads check with a HEAD meanwhile if no earlier listing is complete")
            try? await database.listingFailed(prefix: prefix, refused: false, error: why, now: clock.now())
            statusChanges.changed()
            return .failed(why)
        }
    }

    /// After a complete listing of the user's photos: every object the queue holds as
    /// uploaded (before the listing began) compared with it, a chunk at a time; what the
    /// bucket lacks or holds wrong goes back to be sent. Adds to `result`.
    private func compareUploaded(userId: String, listingStartedAt: Date, checkETags: Bool,
                                 into result: inout DaemonStatus.Verify) async throws {
        let prefix = Self.photosPrefix(userId)
        var after: String?
        var askedAboutKMS = false
        while true {
            let chunk = try await database.uploadedObjects(keyPrefix: prefix, after: after, limit: 1000)
            guard let last = chunk.last else { break }
            after = last.md5
            var verdicts = chunk.map {
                ObjectCheck.verdict($0, listingStartedAt: listingStartedAt, checkETags: checkETags, sseKms: result.sseKms)
            }
            // An ETag that is an MD5, but not the one of the bytes: wrong bytes, or SSE-KMS,
            // whose ETags are no MD5 at all. One HEAD tells which, before anything is re-sent.
            if checkETags, !askedAboutKMS, let i = verdicts.firstIndex(of: .wrongETag) {
                askedAboutKMS = true
                if await encryptsWithKMS(key: prefix + chunk[i].md5 + ".dat", prefix: prefix) {
                    result.sseKms = true
                    logger.notice("the bucket encrypts with SSE-KMS: its ETags are not MD5s, so only `verify --deep` proves the bytes")
                    verdicts = chunk.map { ObjectCheck.verdict($0, listingStartedAt: listingStartedAt, checkETags: true, sseKms: true) }
                }
            }
            var missing: [String] = []
            var wrong: [String] = []
            for (object, verdict) in zip(chunk, verdicts) {
                switch verdict {
                case .tooRecent: continue
                case .ok: break
                case .unproven: result.unproven += 1
                case .missing: result.missing += 1; missing.append(object.md5)
                case .wrongSize: result.wrongSize += 1; wrong.append(object.md5)
                case .wrongETag: result.wrongETag += 1; wrong.append(object.md5)
                }
                if verdict != .ok && verdict != .unproven && !object.hasLiveFile { result.lost += 1 }
                result.checked += 1
                if verdict != .ok && verdict != .unproven {
                    logger.info("not in the bucket as backed up", metadata: ["key": "\(prefix)\(object.md5).dat", "found": "\(verdict)"])
                }
            }
            result.mismatched = result.wrongSize + result.wrongETag + result.readBackWrong
            result.requeued += try await database.requeue(missing, overwrite: false,
                                                    reason: "its object was not in the bucket any more: sending it again", now: clock.now())
            result.requeued += try await database.requeue(wrong, overwrite: true,
                                                    reason: "the bucket held other bytes under its key: sending it again", now: clock.now())
            if verify.phase == .comparing { verify.done += chunk.count; verify.result = result; verify.result.running = true }
            statusChanges.changed()
            await Task.yield()
        }
    }

    /// Whether HEAD says `key` is encrypted with SSE-KMS (unknown counts as no).
    private func encryptsWithKMS(key: String, prefix: String) async -> Bool {
        let info = try? await request(prefix: prefix) { bucket throws(S3Error) in try await bucket.headObject(key: key) }
        return info?.etagIsNotMD5 ?? false
    }

    // MARK: verify

    private func runVerify(userId: String, deepPercent: Double?) async {
        passRunning = true
        defer { passRunning = false }
        let startedAt = clock.now()
        var result = DaemonStatus.Verify(running: true, deepPercent: deepPercent)
        verify.phase = .listing
        verify.done = 0
        verify.result = result
        statusChanges.changed()
        let deep = deepPercent.map { ", then reading back \(Self.percent($0)) of the objects" } ?? ""
        logger.notice("verify: listing the bucket\(deep)")

        let outcome = await listPrefix(Self.photosPrefix(userId), userId: userId, matchObjects: true)
        switch outcome {
        case .complete(let startedAt):
            verify.phase = .comparing
            verify.done = 0
            verify.total = try? await database.uploadedObjectCount()
            do {
                try await compareUploaded(userId: userId, listingStartedAt: startedAt, checkETags: true, into: &result)
            } catch {
                return await finishVerify(failure: "cannot read the queue database: \(error)", partial: result)
            }
            await listPrefix(Self.thumbnailsPrefix(userId), userId: userId, matchObjects: false)
        case .refused(let why):
            // Without a listing nothing proves presence by itself, but reading back still does.
            guard deepPercent != nil else {
                return await finishVerify(failure: "\(why). verify needs to list the bucket; `photolalactl verify --deep PERCENT` reads objects back instead",
                                    partial: result)
            }
            result.lastError = "\(why): only the objects read back were checked"
        case .failed(let why):
            return await finishVerify(failure: why, partial: result)
        case .interrupted:
            return await finishVerify(failure: "verify was interrupted (photolalad signed out, paused by the account, or stopping)", partial: result)
        }

        if let deepPercent {
            await readBack(userId: userId, percent: deepPercent, verifyStartedAt: startedAt, into: &result)
        }
        result.running = false
        result.checkedAt = Timestamp.string(clock.now())
        // Kept and in the audit trail before anyone can see it done: `keep` suspends, and
        // a caller that polls for the end and then reads the trail must find it there.
        await keep(result)
        recordVerify(result, .ok)
        verify.phase = .done
        verify.result = result
        logger.notice("verify done", metadata: [
            "checked": "\(result.checked)", "missing": "\(result.missing)", "wrongSize": "\(result.wrongSize)",
            "wrongETag": "\(result.wrongETag)", "unproven": "\(result.unproven)", "readBack": "\(result.readBack)",
            "readBackWrong": "\(result.readBackWrong)", "queued": "\(result.requeued)", "sseKms": "\(result.sseKms)"])
        statusChanges.changed()
    }

    /// Ends the verify under way (or one asked for that cannot begin) as failed, keeping
    /// what it found so far.
    private func finishVerify(failure: String, partial: DaemonStatus.Verify? = nil) async {
        verifyAsked = nil
        var result = partial ?? verify.result
        result.running = false
        result.lastError = failure
        result.checkedAt = Timestamp.string(clock.now())
        await keep(result)
        recordVerify(result, .failed)
        verify.phase = .failed
        verify.result = result
        logger.warning("verify failed: \(failure)")
        statusChanges.changed()
    }

    /// A verify's end in the audit trail, as the one who asked for it.
    private func recordVerify(_ r: DaemonStatus.Verify, _ outcome: AuditOutcome) {
        var details: AuditDetails = [
            "step": "finished", "checked": .int(Int64(r.checked)), "missing": .int(Int64(r.missing)),
            "mismatched": .int(Int64(r.mismatched)), "readBack": .int(Int64(r.readBack)), "requeued": .int(Int64(r.requeued)),
        ]
        if let error = r.lastError { details["error"] = .string(error) }
        audit?.record(AuditEvent(.verify, by: verifyActor, outcome, details))
    }

    /// The result survives a restart in the queue's `setting` table.
    private func keep(_ result: DaemonStatus.Verify) async {
        if let data = try? JSONEncoder().encode(result) {
            try? await database.setSetting(Self.lastVerifyKey, String(decoding: data, as: UTF8.self))
        }
    }

    private static func percent(_ p: Double) -> String {
        p == p.rounded() ? "\(Int(p))%" : String(format: "%.2g%%", p)
    }

    // MARK: verify --deep

    /// The share `percent` of the uploaded objects (at least one), those never read back
    /// first, `readBackConcurrency` at a time; each streamed through an MD5 a buffer at a
    /// time (memory stays flat whatever their size) and compared with its key: the only
    /// check that holds whatever the bucket does to ETags.
    private func readBack(userId: String, percent: Double, verifyStartedAt: Date, into result: inout DaemonStatus.Verify) async {
        let prefix = Self.photosPrefix(userId)
        let total = (try? await database.uploadedObjectCount()) ?? 0
        let count = total == 0 ? 0 : max(1, Int((Double(total) * percent / 100).rounded(.up)))
        guard let picks = try? await database.objectsToReadBack(count: count, keyPrefix: prefix, uploadedBefore: verifyStartedAt),
              !picks.isEmpty else { return }
        verify.phase = .readingBack
        verify.done = 0
        verify.total = picks.count
        statusChanges.changed()
        var unreadable = 0
        var lastProblem: String?
        var different: [String] = []
        var missing: [String] = []
        await withTaskGroup(of: (String, ReadBack).self) { group in
            var next = picks.makeIterator()
            func start() -> Bool {
                guard let pick = next.next() else { return false }
                group.addTask { (pick.md5, await self.readBack(md5: pick.md5, size: pick.size, prefix: prefix)) }
                return true
            }
            for _ in 0..<options.readBackConcurrency where start() {}
            while let (md5, outcome) = await group.next() {
                switch outcome {
                case .same:
                    result.readBack += 1
                    try? await database.markReadBack(md5: md5, now: clock.now())
                case .different:
                    result.readBack += 1
                    result.readBackWrong += 1
                    different.append(md5)
                    logger.warning("verify: the bytes read back are not the ones backed up", metadata: ["key": "\(prefix)\(md5).dat"])
                case .missing:
                    result.missing += 1
                    missing.append(md5)
                    logger.warning("verify: not in the bucket", metadata: ["key": "\(prefix)\(md5).dat"])
                case .unreadable(let why):
                    unreadable += 1
                    lastProblem = why
                }
                verify.done += 1
                verify.result = result
                statusChanges.changed()
                _ = start()
            }
        }
        result.mismatched = result.wrongSize + result.wrongETag + result.readBackWrong
        let now = clock.now()
        await result.requeued += (try? database.requeue(different, overwrite: true, reason: "read back by verify, the bucket held other bytes: sending it again", now: now)) ?? 0
        await result.requeued += (try? database.requeue(missing, overwrite: false, reason: "its object was not in the bucket any more: sending it again", now: now)) ?? 0
        if let lastProblem {
            result.lastError = "\(unreadable) object\(unreadable == 1 ? "" : "s") could not be read back (last: \(lastProblem))"
        }
    }

    /// One object, streamed through an MD5.
    private func readBack(md5: String, size: Int64, prefix: String) async -> ReadBack {
        let key = prefix + md5 + ".dat"
        let digest = Mutex(MD5())
        let received = Mutex<Int64>(0)
        do {
            _ = try await request(prefix: prefix) { bucket throws(S3Error) in
                // A retry reads from the start again.
                digest.withLock { $0 = MD5() }
                received.withLock { $0 = 0 }
                return try await bucket.getObject(key: key, expectedBytes: size) { buffer in
                    digest.withLock { md5 in buffer.withUnsafeReadableBytes { md5.update($0) } }
                    received.withLock { $0 += Int64(buffer.readableBytes) }
                }
            }
        } catch let error as S3Error where error.kind == .notFound {
            return .missing
        } catch {
            return .unreadable("\(key): \(error)")
        }
        let hex = Hex.string(digest.withLock { $0.finalize() })
        return hex == md5 && received.withLock({ $0 }) == size ? .same : .different
    }

    /// The listing of `prefix` as the queue database holds it, with what this process
    /// knows beyond it: a quiet pass's end, the progress of the pass under way.
    private func listing(_ prefix: String) async -> InventoryListing? {
        var listing = try? await database.inventoryListing(prefix: prefix)
        if let at = quietlyListedAt[prefix], listing?.state == .complete, at > listing?.listedAt ?? .distantPast {
            listing?.listedAt = at
        }
        if let pass = running[prefix], pass.quiet {
            listing?.state = .listing
            listing?.seen = pass.seen
        }
        return listing
    }

    // MARK: status

    /// The inventory's part of the status: what the last listing found, the one under way,
    /// and the last verify.
    package func contribute(to s: inout DaemonStatus) async {
        s.verify = verify.result
        guard let userId = await bucket.userId else { return }
        let photos = await listing(Self.photosPrefix(userId))
        let thumbnails = await listing(Self.thumbnailsPrefix(userId))
        s.inventory.objects = (photos?.objects ?? 0) + (thumbnails?.objects ?? 0)
        s.inventory.listedAt = photos?.listedAt.map(Timestamp.string)
        s.inventory.lastError = photos?.lastError
        switch photos?.state {
        case nil: s.inventory.state = .notListed
        case .listing?: s.inventory.state = .listing
        case .complete?: s.inventory.state = .ok
        case .refused?: s.inventory.state = .refused
        case .failed?: s.inventory.state = .failed
        }
        if photos?.state == .listing || passRunning { s.inventory.seen = (photos?.seen ?? 0) + (thumbnails?.state == .listing ? thumbnails?.seen ?? 0 : 0) }
        if !passRunning, photos?.state != .listing {
            let next = schedule.nextListing(photos: photos, interval: Units.seconds(options.interval), now: clock.now(), random: 0.5)
            s.inventory.nextListingAt = Timestamp.string(next)
        }
    }
}
