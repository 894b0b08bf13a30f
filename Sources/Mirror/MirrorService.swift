#if canImport(Glibc)
import Glibc
#endif
import Bucket
import Digests
import Foundation
import Logging
import ManifestFormat
import PhotolalaCore
import Queue
import RestoreFiles
import RestoreRelay
import ServiceLifecycle
import Synchronization

/// The mirror stage (mirror.md): the NAS keeps its own verified, dated copy of every
/// photo of the account in one folder, continuously. It learns the account's objects from
/// a full listing of `photos/{userId}/` (at start, every `list_interval`, on `mirror
/// --pass`) and, between two, from the apps' catalog pointer, one GET every
/// `check_interval` (a new catalog: the phones' new photos); it decides what is missing
/// here (`MirrorPlan`), fetches it through its own bucket session (`MirrorCopy`: written
/// like a restore), and keeps every object it ever copied by MD5 in the queue database, so
/// a copy renamed, moved or deleted by the user is not fetched again, and nothing is ever
/// deleted because the account deleted it. It waits while the account, the user, the
/// bandwidth timetable, the folder or its free space say so (`MirrorPause`).
package actor MirrorService: Service, Stage {
    /// Reads the bucket in place 4 times (0.25–8 s) before a pass or an object waits.
    package static let budget = BucketBudget(transientRetries: 4, backoff: Backoff(base: 1, cap: 8, jitter: .full, floor: 0.25),
                                     repeatsUnreadableAnswers: true)
    /// An object that failed (S3, the network): 1 minute doubling to 6 hours.
    static let retry = Backoff(base: 60, cap: 6 * 3600, jitter: .equal, floor: 30)
    /// An object refused (its bytes are not what its key says): 1 hour doubling to 7 days.
    static let refusalRetry = Backoff(base: 3600, cap: 7 * 86400, jitter: .equal, floor: 600)
    /// While paused by the folder or its space: looked at again this often (a stat).
    static let folderLook: TimeInterval = 30

    static let folderKey = "mirror.folder"
    static let markerKey = "mirror.marker"
    static let accountKey = "mirror.account"

    /// The queue, clock, log, status feed and audit trail (`Stage` reads them through it).
    package nonisolated let context: StageContext
    private let session: BucketSession
    /// The account's standing (signed in, not paused by the account): no request without it.
    private let account: any StageGate
    /// The user's pause (`photolalactl pause`).
    private let user: any StageGate
    /// The bandwidth timetable in force: a `0` slot pauses the mirror too.
    private let schedule: BandwidthFeed
    private let sha256: (any SHA256Lookup)?
    private var options: Options
    private let bandwidth: TokenBucket
    private let lanes = OpenFileLanes()
    private let meter = RateMeter()
    private var loop: StageLoop?

    // What the stage knows in memory (a restart begins with a full pass).
    private var memory = MirrorSchedule.Memory()
    private var catalog: (pointer: String, dates: CatalogDates)?
    /// Catalog rows whose objects the bucket did not hold, until the next full pass.
    private var absent: Set<MD5Value> = []
    /// The folder is new to the entries (a first run, a lost state, another folder): adopt.
    private var needsAdoption = false
    private var folderProblem: String?
    private var diskFull = false
    /// A copy of this pull found the disk full (ENOSPC) though `min_free` said it fit.
    private var noSpace = false
    private var pulling = false
    private var pause: MirrorPause.Reason?
    private var lastError: String?
    /// Objects being fetched, and their sizes (counted against `min_free` before they land).
    private var inFlight: [MD5Value: Int64] = [:]
    private var counts = MirrorCounts()
    private var countsAt: Date?

    package init(context: StageContext, bucket: BucketSession, account: any StageGate, user: any StageGate, schedule: BandwidthFeed,
                 sha256: (any SHA256Lookup)?, options: Options) {
        self.context = context
        self.session = bucket
        self.account = account
        self.user = user
        self.schedule = schedule
        self.sha256 = sha256
        self.options = options
        bandwidth = TokenBucket(bytesPerSecond: options.downloadLimit)
    }

    package func apply(_ new: Options) async {
        guard new.same != options.same || new.trust != options.trust else { return }
        let moved = new.folder != options.folder
        options = new
        await bandwidth.setRate(new.downloadLimit)
        await session.apply(trust: new.trust)
        if moved {
            memory = MirrorSchedule.Memory()
            folderProblem = nil
            diskFull = false
        }
        statusChanges.changed()
        loop?.wake()
    }

    package func run() async throws {
        let loop = StageLoop(clock: clock, wakes: [.stream(account.changes()), .stream(user.changes()), .signal(schedule.changes)])
        self.loop = loop
        await loop.run { _ in await self.step() }
        lanes.shutdown()
        await session.shutdown()
    }

    // MARK: the step

    private func step() async -> StageLoop.Next {
        guard let folder = options.folder else {
            pause = nil
            return .wake
        }
        var facts = MirrorPause.Facts()
        let userId = await session.userId
        facts.account = userId == nil ? "not signed in" : await account.blockReason()
        facts.userPaused = await user.blockReason() != nil
        let slot = schedule.current
        facts.scheduleZero = slot.scheduled && slot.isPaused
        if let reason = MirrorPause.reason(facts) {
            setPause(reason, why: facts.account ?? (facts.userPaused ? "paused by the user" : "a 0 slot of the bandwidth timetable"))
            return .wake
        }
        guard let userId else { return .wake }
        if let problem = await prepareFolder(folder, userId: userId) {
            folderProblem = problem
            setPause(.folder)
            return .wait(until: clock.now().addingTimeInterval(Self.folderLook))
        }
        folderProblem = nil
        let now = clock.now()
        let plan = MirrorSchedule(checkInterval: options.checkInterval, listInterval: options.listInterval)
        switch plan.next(memory, now: now, random: .random(in: 0..<1)) {
        case .fullPass:
            await fullPass(userId: userId, folder: folder)
        case .check:
            await check(userId: userId, folder: folder)
        case .wait(let until):
            await thaw(userId: userId)
            // Objects whose retry came due, or a full disk looked at again.
            let pullNow = if diskFull { true } else { await dueNow() }
            if pullNow { await pull(userId: userId, folder: folder) }
            var next = until
            if let due = (try? await database.mirrorNextAttempt(in: [.pending, .refused, .thawing])) ?? nil, due > clock.now() {
                next = min(next, due)
            }
            if diskFull || folderProblem != nil { next = min(next, clock.now().addingTimeInterval(Self.folderLook)) }
            setPause(diskFull ? .diskFull : folderProblem != nil ? .folder : nil)
            return .wait(until: next)
        }
        setPause(diskFull ? .diskFull : folderProblem != nil ? .folder : nil)
        return .now
    }

    /// Whether an object waits to be fetched now.
    private func dueNow() async -> Bool {
        guard let due = (try? await database.mirrorNextAttempt(in: [.pending, .refused])) ?? nil else {
            return ((try? await database.mirrorEntries(in: [.pending], dueBy: clock.now(), limit: 1)) ?? []).isEmpty == false
        }
        return due <= clock.now()
    }

    private func setPause(_ reason: MirrorPause.Reason?, why: String? = nil) {
        guard reason != pause else { return }
        pause = reason
        if let reason {
            logger.notice("the mirror waits", metadata: ["reason": "\(reason.rawValue)", "why": "\(why ?? folderProblem ?? lastError ?? "")"])
        } else {
            logger.info("the mirror goes on")
        }
        statusChanges.changed()
    }

    // MARK: the folder

    /// Makes the folder ready, or says why it is not (nil: ready). Writes only a first
    /// time, a marker put back by hand, or a change of folder or account.
    private func prepareFolder(_ path: String, userId: String) async -> String? {
        let folder = MirrorFolder(path: path, dirMode: options.dirMode, owner: options.owner)
        let accountTag = MirrorFolder.account(userId)
        let known = (try? await database.settings(prefix: "mirror.")) ?? [:]
        let ours = known[Self.folderKey] == path && known[Self.accountKey] == accountTag
        if known[Self.accountKey] != accountTag || known[Self.folderKey] != path, known[Self.accountKey] != nil {
            // Another account or another folder: its entries say nothing of this one.
            do {
                try await database.forgetMirror()
                try await database.setSettings([Self.folderKey: nil, Self.markerKey: nil, Self.accountKey: nil])
            } catch {
                return "the queue database: \(error)"
            }
            memory = MirrorSchedule.Memory()
            catalog = nil
        }
        switch folder.preparation(marker: ours ? known[Self.markerKey] : nil, account: accountTag) {
        case .ready: return nil
        case .problem(let why): return why
        case .claim: return await claim(folder, account: accountTag)
        }
    }

    /// The marker written, the folder recorded as this account's: its files are adopted.
    private func claim(_ folder: MirrorFolder, account: String) async -> String? {
        do {
            let id = try folder.mark(account: account)
            try await database.setSettings([Self.folderKey: folder.path, Self.markerKey: id, Self.accountKey: account])
        } catch let problem as MirrorFolder.Problem {
            if problem.errno == EROFS || problem.errno == EACCES || problem.errno == EPERM { return folder.unwritable() ?? problem.description }
            return problem.description
        } catch {
            return "the queue database: \(error)"
        }
        logger.notice("the mirror's folder is ready; files already in it are adopted", metadata: ["folder": "\(folder.path)"])
        needsAdoption = true
        memory.passAsked = true
        return nil
    }

    // MARK: passes

    /// The catalog, a listing of every object, the folder surveyed, archived objects asked
    /// after, then the pull.
    private func fullPass(userId: String, folder: String) async {
        pulling = true
        statusChanges.changed()
        defer {
            pulling = false
            statusChanges.changed()
        }
        let startedAt = clock.now()
        memory.passAsked = false
        guard case .some(let dates) = await readCatalog(userId: userId) else { return failed("") }
        let listing = MirrorInventory(database: database, session: session, userId: userId, budget: Self.budget,
                                      include: options.include, onCloudDelete: options.onCloudDelete, folder: folder,
                                      catalog: dates)
        let clock = self.clock
        let result = await listing.run(now: { clock.now() })
        if result.interrupted { return }
        if let failure = result.failure {
            logger.warning("the mirror's listing stopped: \(failure)")
            return failed(failure)
        }
        absent = []
        await trash(result.trash)
        memory.fullPassAt = startedAt
        memory.checkedAt = startedAt
        memory.failures = 0
        memory.failedAt = nil
        lastError = nil
        await survey(folder: folder)
        markCounts()
        logger.info("the mirror listed the account", metadata: [
            "objects": "\(result.listed)", "new": "\(result.new)", "lost": "\(result.lost)",
            "seconds": "\(String(format: "%.1f", clock.now().timeIntervalSince(startedAt)))"])
        await thaw(userId: userId)
        await pull(userId: userId, folder: folder)
    }

    /// The catalog's pointer; when it names another snapshot, its new rows and its dropped ones.
    private func check(userId: String, folder: String) async {
        let copy = AppCatalogCopy(session: session, userId: userId, budget: Self.budget, directory: options.scratchDirectory)
        let pointer: AppCatalogCopy.Pointer
        do {
            pointer = try await copy.pointer()
        } catch {
            if !error.interrupted { failed(error.why) }
            return
        }
        memory.checkedAt = clock.now()
        memory.failures = 0
        memory.failedAt = nil
        guard case .snapshot(let md5) = pointer, md5 != catalog?.pointer else {
            // Nothing new: nothing written, one request made.
            await thaw(userId: userId)
            if await dueNow() { await pull(userId: userId, folder: folder) }
            return
        }
        pulling = true
        statusChanges.changed()
        defer {
            pulling = false
            statusChanges.changed()
        }
        let table: CatalogDates
        do {
            switch try await copy.table(md5) {
            case .success(let t): table = t
            case .failure(let unreadable):
                logger.notice("the mirror cannot use the apps' catalog: \(unreadable.why)")
                return
            }
        } catch {
            if !error.interrupted { failed(error.why) }
            return
        }
        let check = MirrorCatalogCheck(database: database, session: session, userId: userId, budget: Self.budget, include: options.include,
                                       onCloudDelete: options.onCloudDelete, folder: folder)
        let clock = self.clock
        let result = await check.run(new: table, previous: catalog?.dates, absent: absent, now: { clock.now() })
        absent = result.absent
        if let failure = result.failure { return failed(failure) }
        catalog = (md5, table)
        await trash(result.trash)
        markCounts()
        if result.new > 0 || result.lost > 0 {
            logger.info("the apps' catalog changed", metadata: ["new": "\(result.new)", "lost": "\(result.lost)"])
        }
        await thaw(userId: userId)
        await pull(userId: userId, folder: folder)
    }

    /// The catalog's table for this pass: the one in hand if the pointer still names it.
    /// nil inside: no catalog, or one that cannot be used (dates come from the objects);
    /// nil: the bucket could not be read.
    private func readCatalog(userId: String) async -> CatalogDates?? {
        let copy = AppCatalogCopy(session: session, userId: userId, budget: Self.budget, directory: options.scratchDirectory)
        do {
            switch try await copy.pointer() {
            case .none:
                catalog = nil
                return .some(nil)
            case .malformed:
                logger.notice("the apps' catalog pointer does not hold an MD5: photos are dated by their objects' times")
                return .some(nil)
            case .snapshot(let md5):
                if let catalog, catalog.pointer == md5 { return .some(catalog.dates) }
                switch try await copy.table(md5) {
                case .success(let table):
                    catalog = (md5, table)
                    return .some(table)
                case .failure(let unreadable):
                    logger.notice("the mirror cannot use the apps' catalog: \(unreadable.why)")
                    return .some(nil)
                }
            }
        } catch {
            return nil
        }
    }

    private func failed(_ why: String) {
        memory.failures += 1
        memory.failedAt = clock.now()
        if !why.isEmpty { lastError = why }
        statusChanges.changed()
    }

    // MARK: the folder at a full pass

    private func survey(folder: String) async {
        let (adopt, inFlight, clock) = (needsAdoption, Set(self.inFlight.keys), clock)
        let looked = await MirrorSurvey(database: database, root: folder).look(adopt: adopt, inFlight: inFlight, now: { clock.now() },
                                                                                 logger: logger)
        if looked, adopt { needsAdoption = false }
    }

    // MARK: what the account lost

    /// Copies the account lost, into `.trash/` (`MirrorTrash`).
    private func trash(_ entries: [MirrorEntry]) async {
        guard !entries.isEmpty, let folder = options.folder else { return }
        let trash = MirrorTrash(database: database, folder: folder, dirMode: options.dirMode, owner: options.owner, clock: clock,
                                logger: logger, audit: audit)
        if let problem = await trash.run(entries) { lastError = problem }
    }

    // MARK: archived objects

    /// Archived objects asked back and looked at (`MirrorThaw`).
    private func thaw(userId: String) async {
        let thaw = MirrorThaw(database: database, session: session, userId: userId, rule: ThawRule(checkInterval: options.checkInterval),
                              onCloudDelete: options.onCloudDelete, clock: clock, logger: logger)
        await thaw.run(thawArchived: options.thawArchived) { await self.markCounts() }
    }

    // MARK: the pull

    /// Every object due, `concurrency` at a time (fewer while uploads are under way), each
    /// only if the folder keeps `min_free` with it written.
    private func pull(userId: String, folder: String) async {
        let sha = self.sha256
        let clock = self.clock
        let copier = MirrorCopy(
            database: database,
            transfer: MirrorTransfer(session: session, prefix: "photos/\(userId)/", budget: Self.budget, bandwidth: bandwidth,
                                     limited: options.downloadLimit != nil, lanes: lanes),
            writer: RestoreWriter(files: .init(owner: options.owner, mode: options.fileMode), folders: .init(owner: options.owner, mode: options.dirMode)),
            root: folder, userId: userId)
        let space = MirrorFolder(path: folder, dirMode: options.dirMode, owner: options.owner)
        var full = false
        var launched = 0
        noSpace = false
        var stop = false
        var after: MD5Value?
        var sweptFromStart = true
        var fetchedThisSweep = false
        // A pipeline: `limit` copies downloading at once; one whose bytes are in is checked
        // and put in place by a task of its own while the next download begins (the lanes
        // that hash it wait a moment for others: a download slot never waits with them).
        enum Step: Sendable {
            case begun(MirrorEntry, MirrorCopy.Begun)
            case done(MirrorEntry, MirrorCopy.Outcome)
        }
        await withTaskGroup(of: Step.self) { group in
            var downloading = 0
            var running = 0
            var queue: [MirrorEntry] = []
            while true {
                let limit = ((try? await database.hasUploadsInFlight()) ?? false) ? options.whileUploading : options.concurrency
                while !stop && downloading < limit {
                    if queue.isEmpty {
                        queue = (try? await database.mirrorEntries(in: [.pending, .refused], after: after, dueBy: clock.now(), limit: 64)) ?? []
                        queue.removeAll { inFlight[$0.md5] != nil }
                        if let last = queue.last { after = last.md5 }
                        if queue.isEmpty {
                            // Once more from the start for what arrived meanwhile below `after`.
                            if !sweptFromStart && fetchedThisSweep {
                                after = nil
                                sweptFromStart = true
                                fetchedThisSweep = false
                                continue
                            }
                            break
                        }
                        sweptFromStart = after == nil
                    }
                    let entry = queue.removeFirst()
                    let accountBlocked = await account.blockReason() != nil
                    let userPaused = await user.blockReason() != nil
                    if accountBlocked || userPaused || (schedule.current.scheduled && schedule.current.isPaused) {
                        stop = true
                        break
                    }
                    let reserved = inFlight.values.reduce(0, +)
                    guard let free = space.space(),
                          FreeSpaceRule.fits(available: free.available, total: free.total, next: entry.size + reserved, minFree: options.minFree) else {
                        full = true
                        stop = true
                        break
                    }
                    inFlight[entry.md5] = entry.size
                    downloading += 1
                    running += 1
                    launched += 1
                    fetchedThisSweep = true
                    let expected = await sha?.sha256(of: entry.md5)
                    group.addTask { .begun(entry, await copier.begin(entry, sha256: expected, now: { clock.now() })) }
                }
                guard running > 0, let step = await group.next() else { break }
                switch step {
                case .begun(let entry, .arrived(let arrived)):
                    downloading -= 1
                    group.addTask { .done(entry, await copier.complete(arrived, now: { clock.now() })) }
                case .begun(let entry, .finished(let outcome)):
                    downloading -= 1
                    running -= 1
                    inFlight[entry.md5] = nil
                    if await handle(entry, outcome, userId: userId) == false { stop = true }
                case .done(let entry, let outcome):
                    running -= 1
                    inFlight[entry.md5] = nil
                    if await handle(entry, outcome, userId: userId) == false { stop = true }
                }
            }
        }
        // The gathering buffers (8 MB at most) are not kept between pulls.
        DirectBuffers.shared.drop()
        full = full || noSpace
        if full && !diskFull {
            logger.warning("the mirror's folder has less free space than mirror.min_free with the next copy: it waits",
                           metadata: ["folder": "\(folder)", "minFree": "\(options.minFree)"])
        }
        diskFull = full
        if diskFull { setPause(.diskFull) }
        if launched > 0 { markCounts() }
    }

    /// One copy's outcome recorded; false: stop starting others (disk full, folder, a stop).
    private func handle(_ entry: MirrorEntry, _ outcome: MirrorCopy.Outcome, userId: String) async -> Bool {
        let now = clock.now()
        var e = entry
        switch outcome {
        case .done(let done, let problems):
            meter.add(done.size)
            if let problem = problems.first ?? options.ownerProblem { lastError = problem }
            if done.state == .adopted {
                logger.info("the mirror found a copy already in its folder", metadata: ["path": "\(done.path ?? "")"])
            }
            markCounts()
            return true
        case .refused(let why):
            e.state = .refused
            e.refusals += 1
            e.nextAttemptAt = now.addingTimeInterval(Self.refusalRetry.delay(after: e.refusals, random: .random(in: 0..<1))).timeIntervalSince1970
            e.lastError = why
            let key = e.key(userId: userId)
            logger.warning("the mirror refused an object", metadata: ["key": "\(key)", "why": "\(why)"])
            DaemonCounter.mirrorRefused.increment()
            audit?.record(AuditEvent(.mirrorRefused, by: .daemon, .refused, ["key": .string(key), "why": .string(why)]))
        case .gone:
            switch MirrorPlan.lost(e, onCloudDelete: options.onCloudDelete) {
            case .forget: try? await database.applyMirror(saving: [], forgetting: [e.md5], now: now)
            case .mark(let marked): try? await database.saveMirror(marked, now: now)
            case .trash(let t): await trash([t])
            case .none: break
            }
            markCounts()
            return true
        case .archived:
            e.state = .archived
            e.thawAskedAt = nil
            e.nextAttemptAt = nil
        case .diskFull(let why):
            noSpace = true
            lastError = why
            return false
        case .folder(let why):
            folderProblem = why
            return false
        case .failed(let why):
            e.attempts += 1
            e.nextAttemptAt = now.addingTimeInterval(Self.retry.delay(after: e.attempts, random: .random(in: 0..<1))).timeIntervalSince1970
            e.lastError = why
            lastError = why
            logger.info("the mirror could not copy an object; it tries again later", metadata: ["key": "\(e.key(userId: userId))", "why": "\(why)"])
        case .stopped:
            return false
        }
        // The entry as the database holds it now (a name may have been given meanwhile).
        if let current = try? await database.mirrorEntry(e.md5) { e.path = current.path }
        try? await database.saveMirror(e, now: now)
        markCounts()
        return true
    }

    // MARK: commands

    /// `photolalactl mirror --pass`: a full pass now; refused objects are looked at again.
    package func requestPass() async -> String {
        guard options.folder != nil else { return "The mirror is off: set [mirror] folder in photolalad.toml and reload." }
        memory.passAsked = true
        try? await database.mirrorRetryRefused(now: clock.now())
        loop?.wake()
        return "A mirror pass begins now (the catalog, a full listing, then what is missing)."
    }

    /// `photolalactl mirror --refill`: copies removed here are fetched again.
    package func refill(by actor: AuditActor) async -> (ok: Bool, message: String) {
        guard options.folder != nil else { return (false, "The mirror is off: set [mirror] folder in photolalad.toml and reload.") }
        do {
            let n = try await database.mirrorRefill(now: clock.now())
            audit?.record(AuditEvent(.mirrorRefill, by: actor, .ok, ["count": .int(Int64(n))]))
            markCounts()
            loop?.wake()
            return (true, n == 0 ? "Nothing was removed here: nothing to fetch again."
                          : "\(n) cop\(n == 1 ? "y" : "ies") removed here will be fetched again.")
        } catch {
            audit?.record(AuditEvent(.mirrorRefill, by: actor, .failed, ["error": .string("\(error)")]))
            return (false, "could not refill: \(error)")
        }
    }

    /// `photolalactl mirror [--limit N]`; `names`: the caller may see file names.
    package func listing(limit: Int, names: Bool) async -> (DaemonStatus.Mirror, [String: [MirrorEntry]]) {
        var lists: [String: [MirrorEntry]] = [:]
        for (name, states) in [("pending", [MirrorState.pending]), ("archived", [.archived, .thawing]), ("refused", [.refused])] {
            lists[name] = (try? await database.mirrorEntries(in: states, limit: limit)) ?? []
        }
        lists["onlyHere"] = ((try? await database.mirrorGone(limit: limit)) ?? [])
        if !names { for (k, v) in lists { lists[k] = v.map { var e = $0; e.path = nil; return e } } }
        return (await snapshot(), lists)
    }

    // MARK: status

    private func markCounts() {
        countsAt = nil
        statusChanges.changed()
    }

    private func snapshot() async -> DaemonStatus.Mirror {
        if countsAt == nil || clock.now().timeIntervalSince(countsAt!) > 1, let fresh = try? await database.mirrorCounts() {
            counts = fresh
            countsAt = clock.now()
        }
        guard let folder = options.folder else { return DaemonStatus.Mirror() }
        let plan = MirrorSchedule(checkInterval: options.checkInterval, listInterval: options.listInterval)
        return DaemonStatus.Mirror(folder: folder, pause: pause, pulling: pulling || !inFlight.isEmpty, counts: counts, rate: meter.rate(),
                                   lastPassAt: memory.fullPassAt, nextCheckAt: plan.nextLookAt(memory, now: clock.now()),
                                   lastError: pause == .folder ? folderProblem : lastError ?? options.ownerProblem)
    }

    package func contribute(to s: inout DaemonStatus) async {
        s.mirror = await snapshot()
    }
}
