#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import PhotolalaCore
import Queue
import ServiceLifecycle
import Synchronization

/// The audit trail (cli.md "audit"): one JSON line per event in `state_dir/audit.log`
/// (0600), each carrying the SHA-256 of the line before it, rotated by size to
/// `audit.log.1` and `audit.log.2` with the chain going on across files. The queue
/// database keeps the last record's number and hash (the seal) and the record the oldest
/// kept file follows (the head), so a cut tail or a cut start is caught too.
///
/// Parts hand events to `record(_:)`, which never waits: the events wait in a small inbox
/// and the service writes them, so a slow or failing disk never holds up a control call or
/// a stage. Nothing runs while nothing happens: no timer, no write at idle (a NAS's disks
/// may spin down). Each batch of events is written and `fdatasync`ed once, then sealed.
/// A damaged trail never stops the daemon: the break is logged once at start, and new
/// records follow the last one sealed, so `audit --verify` keeps showing the break.
package actor AuditTrail: AuditRecorder, Service {
    package static let defaultMaxSize: Int64 = 8 << 20
    package static let fileName = "audit.log"
    static let sealKey = "audit.seal"
    static let headKey = "audit.head"
    /// Events waiting to be written; beyond it they are counted, dropped and the count logged.
    static let inboxLimit = 1024
    package static let maxDetails = 16
    package static let maxValueLength = 256
    /// How much of a file's end is read to find its last record (records are far smaller).
    static let tailWindow = 64 * 1024

    private struct Pending: Sendable {
        var event: AuditEvent
        var at: Date
    }

    private struct Inbox: Sendable {
        var pending: [Pending] = []
        var dropped = 0
    }

    private let directory: String
    private let database: QueueDatabase
    private var maxSize: Int64
    private let logger: Logger
    private let redactor: SecretRedactor
    private let now: @Sendable () -> Date
    private let userName: @Sendable (UInt32) -> String?
    private let inbox = Mutex(Inbox())
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>

    /// A drain or a query has the turn (`takeTurn`).
    private var busy = false
    private let turns = ChangeFeed()
    private let seals: AuditSealStore
    /// The sealing key of the current epoch (nil: it cannot be read or made; the records
    /// are still chained, and `--verify` says they are not sealed).
    private var sealing: AuditSealStore.KeyState?
    /// The record the oldest kept file follows (the queue database's `audit.head`).
    private var head = AuditMark.origin

    private var opened = false
    private var fd: Int32 = -1
    private var size: Int64 = 0
    private var unsynced = false
    /// The last record written: the next one follows it.
    private var position = AuditMark.origin
    /// Problems already in the journal (by kind), so each is told once until it clears.
    private var reported: [String: String] = [:]

    /// `maxSize`: `audit.max_size` (config.md), the size at which the file is rotated.
    package init(directory: String, database: QueueDatabase, maxSize: Int64 = AuditTrail.defaultMaxSize, logger: Logger,
                 redactor: SecretRedactor = .shared, now: @escaping @Sendable () -> Date = { Date() },
                 userName: @escaping @Sendable (UInt32) -> String? = AuditTrail.systemUserName) {
        self.directory = directory
        seals = AuditSealStore(directory: directory)
        self.database = database
        self.maxSize = max(1, maxSize)
        self.logger = logger
        self.redactor = redactor
        self.now = now
        self.userName = userName
        (wakes, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    // MARK: what the daemon calls

    package nonisolated func record(_ event: AuditEvent) {
        let now = self.now
        inbox.withLock { box in
            guard box.pending.count < Self.inboxLimit else {
                box.dropped += 1
                return
            }
            // Stamped under the lock: records are in the order of their times.
            box.pending.append(Pending(event: event, at: now()))
        }
        wake.yield()
    }

    package func run() async throws {
        await drain()
        for await _ in wakes.cancelOnGracefulShutdown() { await drain() }
        // The last turn, taken even by a cancelled task: what happened until now is kept.
        await takeTurn(evenIfCancelled: true)
        defer { endTurn() }
        await drainNow()
        await closeFile()
    }

    /// Writes what waits now (tests; the queries do it themselves).
    package func flush() async {
        await drain()
    }

    /// `audit.max_size` changed (a reload): the next rotation uses it.
    package func setMaxSize(_ bytes: Int64) {
        maxSize = max(1, bytes)
    }

    /// The newest `limit` records at or after `since`, oldest first; `more` when older ones
    /// were left out by the limit. Lines that are not records are skipped (`verify` names them).
    package func records(since: Date?, limit: Int) async -> (records: [AuditRecord], more: Bool) {
        await takeTurn(evenIfCancelled: true)
        defer { endTurn() }
        await drainNow()
        var newestFirst: [AuditRecord] = []
        let decoder = JSONDecoder()
        for file in 0...2 {
            guard let bytes = files.read(path(file)) else { continue }
            for line in AuditChain.lines(of: bytes).reversed() {
                guard let record = try? decoder.decode(AuditRecord.self, from: Data(line)) else { continue }
                if let since, let at = Timestamp.parse(record.at), at < since { return (newestFirst.reversed(), false) }
                if newestFirst.count >= limit { return (newestFirst.reversed(), true) }
                newestFirst.append(record)
            }
        }
        return (newestFirst.reversed(), false)
    }

    /// The whole chain, oldest file first, from the head to the seal.
    /// Without the verification key: the chain, then the seals' places (the tags need the key,
    /// which the command checks itself: `sealedMaterial`).
    package func verify() async -> AuditVerification {
        await takeTurn(evenIfCancelled: true)
        defer { endTurn() }
        await drainNow()
        let start = await mark(Self.headKey) ?? .origin
        var chain = AuditChain(start: start)
        let entries: [AuditSealCheck.Entry]
        do {
            entries = try seals.entries()
        } catch {
            return AuditVerification(records: 0, firstSeq: nil, lastSeq: nil, files: [], problem: .init(
                kind: .sealMissing, seq: nil, file: AuditSealStore.sealsFile, line: nil, message: "\(error)"))
        }
        var check = AuditSealCheck(entries: entries, state: sealing?.visible, head: start, key: nil)
        for file in [2, 1, 0] {
            guard let bytes = files.read(path(file)) else { continue }
            for (i, line) in AuditChain.lines(of: bytes).enumerated() {
                let (seq, hash) = chain.add(line, file: Self.name(file), line: i + 1)
                check.add(seq: seq, hash: hash)
            }
        }
        var verdict = chain.finish(seal: position)
        let (problem, summary) = check.finish()
        if verdict.problem == nil { verdict.problem = problem }
        verdict.sealing = summary
        return verdict
    }

    /// What `audit --verify --verification-key` checks, for the command to check it itself
    /// (the verification key never reaches the daemon, which may be the thing lied about):
    /// the head, the seal, the key file's state, and the files opened now (their sizes now;
    /// records written meanwhile are left out). docs/audit-seal.md has the layout.
    package func sealedMaterial() async -> AuditMaterial {
        await takeTurn(evenIfCancelled: true)
        defer { endTurn() }
        await drainNow()
        return AuditMaterial(directory: directory, files: [AuditSealStore.sealsFile] + [2, 1, 0].map(Self.name),
                             head: await mark(Self.headKey) ?? .origin, seal: position, state: sealing?.visible)
    }

    /// `audit --verification-key`: the key while it was not yet shown (then it stays until
    /// `verificationKeyTaken`), or when it was shown.
    package func verificationKey() async -> (key: VerificationKey?, fingerprint: String, createdAt: Int64, shownAt: Int64?)? {
        await takeTurn(evenIfCancelled: true)
        defer { endTurn() }
        await openIfNeeded()
        guard let sealing else { return nil }
        let key = seals.waiting(for: sealing)
        return (key, sealing.fingerprint, sealing.createdAt, key == nil ? sealing.shownAt : nil)
    }

    /// The command printed the key: the NAS forgets it (overwritten, then unlinked) and
    /// remembers when. False when `fingerprint` is not the key waiting to be shown.
    package func verificationKeyTaken(fingerprint: String, by caller: AuditActor) async -> Bool {
        await takeTurn(evenIfCancelled: true)
        defer { endTurn() }
        await openIfNeeded()
        guard let state = sealing, state.fingerprint == fingerprint, seals.waiting(for: state) != nil else { return false }
        do {
            sealing = try seals.forgetVerificationKey(state, at: Int64((now().timeIntervalSince1970 * 1000).rounded(.down)))
        } catch {
            problem("verification-key", "cannot forget the audit trail's verification key once shown: \(error)")
            return false
        }
        logger.notice("the audit trail's verification key was shown to root and is no longer kept on this NAS",
                      metadata: ["fingerprint": "\(fingerprint)"])
        record(AuditEvent(.auditVerificationKeyShown, by: caller, .ok, ["fingerprint": .string(fingerprint)]))
        return true
    }

    // MARK: writing

    /// Writing the trail waits on the queue database (the seal, the head), and the actor
    /// takes other calls meanwhile: one drain or query at a time keeps records, rotations
    /// and seals in order. Waits for the turn; with `evenIfCancelled` false, a task
    /// cancelled while waiting gets none (false).
    @discardableResult
    private func takeTurn(evenIfCancelled: Bool = false) async -> Bool {
        while busy {
            for await _ in turns.changes() where !busy { break }
            if busy && Task.isCancelled && !evenIfCancelled { return false }
            if busy && Task.isCancelled {
                // Cancelled: the stream ended at once. Wait without it, a turn is short.
                await Task.yield()
            }
        }
        busy = true
        return true
    }

    private func endTurn() {
        busy = false
        turns.changed()
    }

    private func drain() async {
        guard await takeTurn() else { return }
        defer { endTurn() }
        await drainNow()
    }

    private func drainNow() async {
        await openIfNeeded()
        let (batch, dropped) = inbox.withLock { box in
            defer { box = Inbox() }
            return (box.pending, box.dropped)
        }
        if dropped > 0 {
            logger.error("\(dropped) audit event\(dropped == 1 ? " was" : "s were") not recorded: more than \(Self.inboxLimit) waited to be written")
        }
        var done = 0
        while done < batch.count {
            if let line = render(batch[done]) {
                if size > 0, size + Int64(line.utf8.count) + 1 > maxSize { await rotate() }
                guard append(line) else { break }
            }
            done += 1
        }
        if done < batch.count {
            // Kept for the next event's write (no timer retries): in order, before newer ones.
            let left = Array(batch[done...])
            inbox.withLock { box in
                box.pending.insert(contentsOf: left, at: 0)
                if box.pending.count > Self.inboxLimit {
                    box.dropped += box.pending.count - Self.inboxLimit
                    box.pending.removeLast(box.pending.count - Self.inboxLimit)
                }
            }
        }
        await sync()
    }

    /// The record's line, or nil when even without its secret-bearing details it would
    /// hold a secret the log redactor knows (then it is not written, and the journal says so).
    private func render(_ item: Pending) -> String? {
        var actor = item.event.actor
        if case let .caller(uid, user) = actor {
            let name = user ?? userName(uid)
            actor = .caller(uid: uid, user: name.map { redactor.redact($0) == $0 ? $0 : "[redacted]" })
        }
        var details = AuditDetails()
        var withheld: [String] = []
        for (key, value) in item.event.details.values.sorted(by: { $0.key < $1.key }).prefix(Self.maxDetails) {
            guard case .string(let text) = value else {
                details[key] = value
                continue
            }
            let bounded = text.count > Self.maxValueLength ? String(text.prefix(Self.maxValueLength - 1)) + "…" : text
            if redactor.redact(text) != text || redactor.redact(bounded) != bounded {
                details[key] = "[redacted]"
                withheld.append(key)
            } else {
                details[key] = .string(bounded)
            }
        }
        if !withheld.isEmpty {
            logger.error("an audit record (\(item.event.kind.rawValue)) was given a secret in \(withheld.joined(separator: ", ")): written without it")
        }
        let record = AuditRecord(seq: position.seq + 1, at: AuditLine.timestamp(item.at), event: item.event.kind, actor: actor,
                                 outcome: item.event.outcome, details: details, prev: position.hash)
        let line = AuditLine.render(record)
        guard redactor.redact(line) == line else {
            logger.error("an audit record (\(item.event.kind.rawValue)) would hold a secret: not written")
            return nil
        }
        return line
    }

    private func append(_ line: String) -> Bool {
        guard fd >= 0 || openCurrent() else { return false }
        let bytes = Array(line.utf8) + [UInt8(ascii: "\n")]
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                let why = String(cString: strerror(errno))
                // Nothing half-written stays: the next record starts on a line of its own.
                if written > 0 { _ = ftruncate(fd, off_t(size)) }
                problem("write", "cannot write the audit trail \(path(0)): \(why); its events wait in memory (up to \(Self.inboxLimit)) and are written with the next one")
                return false
            }
            written += n
        }
        size += Int64(bytes.count)
        position = AuditMark(seq: position.seq + 1, hash: AuditLine.hash(line))
        unsynced = true
        cleared("write", "the audit trail can be written again")
        return true
    }

    /// On disk, then sealed: one `fdatasync` per batch. An event is a person's command or
    /// a stage's rare decision, so this is a few syncs an hour, each on a disk the event's
    /// own work already woke; batching them further would need a timer, and a record lost
    /// in a power cut is the one an audit is for.
    private func sync() async {
        guard unsynced, fd >= 0 else { return }
        unsynced = false
        if fdatasync(fd) != 0 {
            problem("sync", "cannot flush the audit trail \(path(0)) to disk: \(String(cString: strerror(errno)))")
        } else {
            cleared("sync", nil)
        }
        seal()
        await save(Self.sealKey, position)
    }

    /// Seals the records written since the last seal as one epoch, then moves the key on:
    /// the seal is on disk before the key that made it is overwritten (docs/audit-seal.md).
    private func seal() {
        guard var state = sealing, position.seq > state.sealed || state.key.epoch == 0 else { return }
        do {
            try seals.append(AuditSeal(epoch: state.key.epoch, from: state.sealed, seq: position.seq, hash: position.hash, head: head,
                                       at: AuditLine.timestamp(now()), key: state.fingerprint).sealed(with: state.key))
        } catch {
            // The records stay chained; the next batch's seal covers them too.
            return problem("seal", "cannot seal the audit trail (\(error)): records wait to be sealed with the next one")
        }
        state.key = state.key.next()
        state.sealed = position.seq
        // Kept in memory whatever the disk says: the next epoch is sealed with the next key.
        sealing = state
        do {
            try seals.saveState(state)
            cleared("seal", nil)
        } catch {
            problem("seal", "cannot move the audit trail's sealing key on (\(error)): the key of a sealed epoch stays on disk until it can")
        }
    }

    /// audit.log → .1 → .2 (the old .2 goes); the chain goes on in the new file.
    private func rotate() async {
        await sync()
        await closeFile()
        var dropping = false
        if access(path(1), F_OK) == 0 {
            dropping = access(path(2), F_OK) == 0
            if rename(path(1), path(2)) != 0 {
                problem("rotate", "cannot rotate the audit trail (\(path(1)) → \(path(2))): \(String(cString: strerror(errno))); \(path(0)) grows past audit.max_size until it can")
                _ = openCurrent()
                return
            }
        }
        if rename(path(0), path(1)) != 0 {
            problem("rotate", "cannot rotate the audit trail (\(path(0)) → \(path(1))): \(String(cString: strerror(errno))); it grows past audit.max_size until it can")
            _ = openCurrent()
            return
        }
        cleared("rotate", nil)
        files.syncDirectory()
        if dropping, let first = files.firstRecord(path(2)) {
            // The oldest kept file now starts later: the head says where (and the next seal binds it).
            head = AuditMark(seq: first.seq - 1, hash: first.prev)
            await save(Self.headKey, head)
            do {
                try seals.prune(before: head.seq)
            } catch {
                problem("seal-prune", "cannot drop the seals of rotated records from \(AuditSealStore.sealsFile): \(error)")
            }
        }
        _ = openCurrent()
    }

    private func openCurrent() -> Bool {
        let existed = access(path(0), F_OK) == 0
        fd = open(path(0), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            problem("open", "cannot open the audit trail \(path(0)): \(String(cString: strerror(errno))); check that \(directory) is writable by the daemon's user")
            return false
        }
        cleared("open", nil)
        // A file put there by hand or from a backup keeps no wider mode: root and the daemon's user only.
        _ = fchmod(fd, 0o600)
        var st = stat()
        size = fstat(fd, &st) == 0 ? Int64(st.st_size) : 0
        if !existed { files.syncDirectory() }
        return true
    }

    private func closeFile() async {
        await sync()
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
    }

    // MARK: start: where the trail stands

    /// Once, before the first write or query: the last record in the files against the
    /// seal. A torn last line (a power cut mid-write, never sealed) is cut off; any other
    /// mismatch is a break, logged once, and the trail goes on after the sealed record.
    private func openIfNeeded() async {
        guard !opened else { return }
        opened = true
        var seal = await mark(Self.sealKey)
        let forward = (try? seals.entries())?.last(where: { $0.seal != nil })?.seal
        if seal == nil, let forward {
            // A rebuilt queue database: the last seal in audit.seals says where the trail ends.
            seal = forward.mark
            await save(Self.sealKey, forward.mark)
            logger.notice("the queue database held no seal of the audit trail: took it from \(AuditSealStore.sealsFile) (record \(forward.seq))")
        }
        if let dropped = files.dropUnfinishedRecord() {
            logger.notice("dropped the end of \(path(0)): \(dropped) bytes of a record cut short by a crash or power cut (never sealed)")
        }
        let last = files.lastLine()
        switch (seal, last) {
        case (nil, nil):
            position = .origin
        case let (nil, last?):
            // A new or rebuilt queue database: the trail's end is taken as it stands.
            position = AuditMark(seq: last.seq ?? 0, hash: last.hash)
            await save(Self.sealKey, position)
            if await mark(Self.headKey) == nil, let first = files.oldestFirstRecord(), first.seq > 1 || first.prev != AuditMark.origin.hash {
                await save(Self.headKey, AuditMark(seq: first.seq - 1, hash: first.prev))
            }
            logger.notice("the queue database held no seal of the audit trail (a new or rebuilt database): sealed it at record \(position.seq) as it stands; a cut before now cannot be caught")
        case let (seal?, nil):
            position = seal
            if seal != .origin {
                logger.warning("the audit trail (\(path(0))) is gone, though the queue database says it ended with record \(seal.seq): new records follow that one, and `photolalactl audit --verify` shows the break")
            }
        case let (seal?, last?):
            position = seal
            if last.seq == seal.seq && last.hash == seal.hash { break }
            if let seq = last.seq, seq > seal.seq, files.chainsForward(from: seal) {
                // Written and synced, but the seal's commit was lost (a crash or power cut
                // between the two): the records are ours.
                position = AuditMark(seq: seq, hash: last.hash)
                await save(Self.sealKey, position)
                logger.notice("sealed audit records \(seal.seq + 1)–\(seq), written just before photolalad stopped")
            } else {
                logger.warning("the audit trail does not end with the record the queue database sealed (record \(seal.seq)): it was cut or changed while photolalad was stopped. New records follow record \(seal.seq); `photolalactl audit --verify` names the break")
            }
        }
        head = await mark(Self.headKey) ?? .origin
        _ = openCurrent()
        openSealing()
    }

    /// The sealing key at start: made the first time (the verification key waits to be shown
    /// to root), moved on if a stop came between a seal and the key's step, and what was
    /// written but not sealed before a stop sealed now.
    private func openSealing() {
        do {
            let (state, opening) = try seals.start(at: position, now: Int64((now().timeIntervalSince1970 * 1000).rounded(.down)))
            switch opening {
            case .kept: break
            case .made:
                logger.notice("made the audit trail's verification key: show it once with sudo photolalactl audit --verification-key and keep it off this NAS",
                              metadata: ["fingerprint": "\(state.fingerprint)"])
            case .remade:
                logger.error("the audit trail's sealing key (\(AuditSealStore.keyFile)) is gone: photolalad seals from now on under a new verification key (show it with sudo photolalactl audit --verification-key); `audit --verify` shows the break")
            }
            sealing = state
            cleared("seal-open", nil)
        } catch {
            problem("seal-open", "cannot open the audit trail's seals (\(error)): records are chained but not sealed until it can")
            return
        }
        if position.seq > (sealing?.sealed ?? .max) || sealing?.key.epoch == 0 {
            if let state = sealing, state.key.epoch > 0 {
                logger.notice("sealed audit records \(state.sealed + 1)–\(position.seq), written before photolalad stopped")
            }
            seal()
        }
    }

    // MARK: files and the database

    /// The files as they stand, read with the size in force.
    private var files: AuditFiles { AuditFiles(directory: directory, maxSize: maxSize) }

    private func path(_ generation: Int) -> String {
        files.path(generation)
    }

    static func name(_ generation: Int) -> String {
        generation == 0 ? fileName : "\(fileName).\(generation)"
    }

    private func mark(_ key: String) async -> AuditMark? {
        do {
            return try await database.setting(key).flatMap(AuditMark.init)
        } catch {
            problem("seal-read", "cannot read the audit trail's \(key) from the queue database: \(error)")
            return nil
        }
    }

    private func save(_ key: String, _ mark: AuditMark) async {
        do {
            try await database.setSetting(key, mark.description)
            cleared("seal", nil)
        } catch {
            problem("seal", "cannot keep the audit trail's \(key) in the queue database (\(error)): a cut tail cannot be caught until it can")
        }
    }

    private func problem(_ kind: String, _ message: String) {
        guard reported[kind] == nil else { return }
        reported[kind] = message
        logger.error("\(message)")
    }

    private func cleared(_ kind: String, _ message: String?) {
        guard reported.removeValue(forKey: kind) != nil else { return }
        if let message { logger.notice("\(message)") }
    }

    /// The name `getpwuid_r` gives a uid, or nil when the user database has none.
    package static func systemUserName(_ uid: UInt32) -> String? {
        var pwd = passwd()
        var result: UnsafeMutablePointer<passwd>? = nil
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &pwd, &buffer, buffer.count, &result) == 0, result != nil, let name = pwd.pw_name else { return nil }
        return String(cString: name)
    }
}
