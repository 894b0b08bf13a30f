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
    package struct Options: Sendable {
        package var folder: String?
        package var include: Settings.Mirror.Include
        package var onCloudDelete: Settings.Mirror.OnCloudDelete
        package var minFree: Settings.Mirror.FreeSpace
        package var downloadLimit: Int64?
        package var thawArchived: Bool
        /// `owner` as ids (`UInt32.max`: that one unchanged); nil: the daemon's.
        package var owner: (uid: UInt32, gid: UInt32)?
        /// Why `owner` names nobody on this system now (nil: it does, or none is set).
        package var ownerProblem: String?
        package var fileMode: UInt32
        package var dirMode: UInt32
        package var checkInterval: TimeInterval
        package var listInterval: TimeInterval
        package var trust: TLSTrust
        /// Where the catalog's copy goes (the state directory).
        package var scratchDirectory: String
        /// Objects fetched at once; 2 while uploads are under way.
        package var concurrency = 8
        package var whileUploading = 2

        package init(_ settings: Settings) {
            let m = settings.mirror
            folder = m.folder
            include = m.include
            onCloudDelete = m.onCloudDelete
            minFree = m.minFree
            downloadLimit = m.downloadLimit
            thawArchived = m.thawArchived
            fileMode = m.fileMode
            dirMode = m.dirMode
            checkInterval = Units.seconds(m.checkInterval)
            listInterval = Units.seconds(m.listInterval)
            trust = TLSTrust(caFile: settings.tls.caFile)
            scratchDirectory = settings.daemon.stateDir
            if let o = m.owner {
                let names = Identities()
                let uid = o.user.map { UInt32($0) ?? names.user($0) } ?? UInt32.max
                let gid = o.group.map { UInt32($0) ?? names.group($0) } ?? UInt32.max
                if let uid, let gid {
                    owner = (uid, gid)
                } else {
                    ownerProblem = "mirror.owner \(o) names nobody on this system now: the copies keep photolalad's owner"
                }
            }
        }

        var same: [String] {
            [folder ?? "", include.rawValue, onCloudDelete.rawValue, minFree.description, "\(downloadLimit ?? 0)", "\(thawArchived)",
             owner.map { "\($0.uid):\($0.gid)" } ?? "", "\(fileMode)", "\(dirMode)", "\(checkInterval)", "\(listInterval)"]
        }
    }

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
        let marker = ours ? known[Self.markerKey] : nil
        switch folder.look() {
        case .ready(let id, let account):
            if let account, account != accountTag {
                return "\(path) holds the copy of another Photolala account (its \(MirrorNaming.marker) says so): set mirror.folder to another folder, or move that one away"
            }
            if let id, id == marker, account != nil { break }
            if let problem = folder.unwritable() { return problem }
            return await claim(folder, account: accountTag)
        case .unmarked:
            if marker != nil {
                return "\(path) has lost its \(MirrorNaming.marker): the volume is probably not mounted, so the mirror waits. If it is the right folder, put the marker back: touch \(path)/\(MirrorNaming.marker)"
            }
            if let problem = folder.unwritable() { return problem }
            return await claim(folder, account: accountTag)
        case .missing(let parentExists):
            if marker != nil {
                return "\(path) is missing: the volume is probably not mounted, so the mirror waits (it never creates the folder again by itself; mount it, or remove mirror.folder)"
            }
            guard parentExists else {
                return "\(path) cannot be made: the folder above it does not exist (create it, or set mirror.folder to a folder whose parent exists)"
            }
            do {
                try folder.create()
            } catch {
                return "\(error)"
            }
            return await claim(folder, account: accountTag)
        case .unusable(let why):
            return why
        }
        return folder.unwritable()
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
        let survey = MirrorSurvey(database: database, root: folder)
        let (adopt, inFlight, clock) = (needsAdoption, Set(self.inFlight.keys), clock)
        let result: Result<MirrorSurvey.Result, any Error>
        do {
            result = .success(try await survey.run(adopt: adopt, inFlight: inFlight, now: { clock.now() }, cancelled: { false }))
        } catch {
            result = .failure(error)
        }
        switch result {
        case .success(let r):
            if adopt { needsAdoption = false }
            if r.adopted + r.moved + r.removed + r.temporaries > 0 {
                logger.notice("the mirror looked at its folder", metadata: [
                    "adopted": "\(r.adopted)", "moved": "\(r.moved)", "removedHere": "\(r.removed)", "temporaryFilesRemoved": "\(r.temporaries)"])
            }
            for problem in r.problems.prefix(3) { logger.warning("the mirror could not read a folder of its own: \(problem)") }
        case .failure(let error):
            logger.error("the mirror could not look at its folder: \(error)")
        }
    }

    // MARK: what the account lost

    /// Moves copies the account lost into `.trash/`, unless that many at once looks like a
    /// listing gone wrong (`TrashGuard`): then they stay, counted as only on this NAS.
    private func trash(_ entries: [MirrorEntry]) async {
        guard !entries.isEmpty, let folder = options.folder else { return }
        let now = clock.now()
        let present = ((try? await database.mirrorCounts()) ?? MirrorCounts()).present
        guard TrashGuard.allows(trashing: entries.count, present: present) else {
            let why = "\(entries.count) copies would move into \(MirrorNaming.trashFolder)/ at once, more than half of the \(present) here: nothing was moved; they stay, counted as only on this NAS (the next full listing decides again)"
            logger.warning("\(why)")
            lastError = why
            try? await database.applyMirror(saving: entries.map { var e = $0; e.gone = true; return e }, forgetting: [], now: now)
            return
        }
        let paths = MirrorPaths(root: folder)
        var moved = 0
        var saving: [MirrorEntry] = []
        for entry in entries {
            var e = entry
            e.gone = true
            guard let path = entry.path else { continue }
            var done = false
            for n in 1...MirrorNaming.maxCandidates {
                let to = MirrorNaming.trash(path, attempt: n)
                do {
                    if try paths.move(path, to: to, dirMode: options.dirMode, owner: options.owner) {
                        e.state = .trashed
                        e.path = to
                        done = true
                        break
                    }
                } catch {
                    // Not there any more (removed here): nothing to move.
                    e.state = paths.identity(of: path) == nil ? .removed : e.state
                    lastError = error.description
                    break
                }
            }
            if done { moved += 1 }
            saving.append(e)
        }
        try? await database.applyMirror(saving: saving, forgetting: [], now: now)
        if moved > 0 {
            logger.notice("the account lost objects the mirror had: their copies moved into \(MirrorNaming.trashFolder)/", metadata: ["count": "\(moved)"])
            audit?.record(AuditEvent(.mirrorTrash, by: .daemon, .ok, ["count": .int(Int64(moved)), "folder": .string(folder)]))
        }
    }

    // MARK: archived objects

    /// With `thaw_archived`, archived objects are asked back (Bulk) once; those asked back
    /// are looked at as `ThawRule` says, and fetched once readable.
    private func thaw(userId: String) async {
        let prefix = "photos/\(userId)/"
        let rule = ThawRule(checkInterval: options.checkInterval)
        let now = clock.now()
        if options.thawArchived {
            let archived = (try? await database.mirrorEntries(in: [.archived], limit: 1000)) ?? []
            for entry in archived where !entry.gone && entry.thawAskedAt == nil && (entry.nextAttemptAt ?? 0) <= now.timeIntervalSince1970 {
                await ask(entry, prefix: prefix, rule: rule)
            }
        }
        let due = (try? await database.mirrorEntries(in: [.thawing], dueBy: now, limit: 1000)) ?? []
        for entry in due {
            let key = entry.key(userId: userId)
            let info: S3Client.ObjectInfo?
            do {
                info = try await session.perform(under: prefix, budget: Self.budget) { bucket throws(S3Error) in try await bucket.headObject(key: key) }
            } catch {
                continue
            }
            let status: ThawRule.RestoreStatus? = switch info?.restore {
            case .available?: .available
            case .inProgress?: .inProgress
            case nil: nil
            }
            var e = entry
            switch ThawRule.step(storageClass: info?.storageClass, restore: status, exists: info != nil) {
            case .fetch, .readable:
                e.state = .pending
                e.attempts = 0
                e.nextAttemptAt = nil
            case .wait:
                e.attempts += 1
                e.nextAttemptAt = rule.nextLook(askedAt: Date(timeIntervalSince1970: e.thawAskedAt ?? now.timeIntervalSince1970), looks: e.attempts + 1)
                    .timeIntervalSince1970
            case .askAgain:
                await ask(e, prefix: prefix, rule: rule)
                continue
            case .gone:
                if case .forget = MirrorPlan.lost(e, onCloudDelete: options.onCloudDelete) {
                    try? await database.applyMirror(saving: [], forgetting: [e.md5], now: now)
                }
                continue
            }
            try? await database.saveMirror(e, now: now)
        }
        if !due.isEmpty { markCounts() }
    }

    private func ask(_ entry: MirrorEntry, prefix: String, rule: ThawRule) async {
        let key = prefix + entry.md5.hex + ".dat"
        let now = clock.now()
        var e = entry
        do {
            let answer = try await session.perform(under: prefix, budget: Self.budget) { bucket throws(S3Error) in
                try await bucket.restoreObject(key: key, days: rule.days, tier: ThawRule.tier)
            }
            e.thawAskedAt = now.timeIntervalSince1970
            switch answer {
            case .available:
                e.state = .pending
                e.nextAttemptAt = nil
            case .started, .inProgress:
                e.state = .thawing
                e.attempts = 0
                e.nextAttemptAt = rule.nextLook(askedAt: now, looks: 1).timeIntervalSince1970
                logger.info("the mirror asked an archived object back", metadata: ["key": "\(key)", "class": "\(entry.storageClass)"])
            }
        } catch {
            e.lastError = "could not be asked back from \(entry.storageClass): \(error)"
            e.nextAttemptAt = now.addingTimeInterval(Self.retry.delay(after: max(1, e.attempts + 1), random: .random(in: 0..<1))).timeIntervalSince1970
            e.attempts += 1
        }
        try? await database.saveMirror(e, now: now)
        markCounts()
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
        var m = DaemonStatus.Mirror()
        guard let folder = options.folder else { return m }
        m.folder = folder
        m.state = pause != nil ? .paused : pulling || !inFlight.isEmpty ? .pulling : .idle
        m.pauseReason = pause.map { DaemonStatus.Mirror.PauseReason(rawValue: $0.rawValue) ?? .folder }
        let c = counts
        m.inAccount = c.inAccount
        m.present = c.present
        m.pending = c.pending
        m.pendingBytes = c.pendingBytes
        m.copied = c.copied
        m.adopted = c.adopted
        m.archived = c.archived
        m.thawing = c.thawing
        m.onlyHere = c.onlyHere
        m.removedHere = c.removedHere
        m.refused = c.refused
        m.refusedRepeatedly = c.refusedRepeatedly
        m.trashed = c.trashed
        m.rate = meter.rate()
        m.lastPassAt = memory.fullPassAt.map(Timestamp.string)
        let plan = MirrorSchedule(checkInterval: options.checkInterval, listInterval: options.listInterval)
        m.nextCheckAt = Timestamp.string(plan.nextLookAt(memory, now: clock.now()))
        m.lastError = pause == .folder ? folderProblem : lastError ?? options.ownerProblem
        return m
    }

    package func contribute(to s: inout DaemonStatus) async {
        s.mirror = await snapshot()
    }
}
