import AsyncHTTPClient
import Foundation
import Logging
import PhotolalaCore
import ServiceLifecycle
import Bucket

/// Where the notify service reads what to tell: the status (its `attention` list is the
/// one source of truth), when it changes, and the day's uploads for the summary.
package protocol NotifySource: Sendable {
    func status() async -> DaemonStatus
    func changes() -> AsyncStream<Void>
    /// Files and bytes backed up since `date`; nil when that cannot be read.
    func uploaded(since date: Date) async -> DaySummary?
}

/// Where the policy's memory is kept (the queue database's `setting` table): read at
/// start, written only when something was decided, so a NAS with nothing to tell writes
/// nothing.
package protocol NotifyMemoryStore: Sendable {
    func loadMemory() async throws -> String?
    func saveMemory(_ text: String) async throws
}

/// Tells the owner when backups stop (config.md "Notifications"): watches the status, lets
/// `NotifyPolicy` decide, and hands each event to every configured channel's outbox. Each
/// channel is sent to by its own task, with its own retries, so a dead receiver delays
/// nothing else, and backing up never waits for any of it. The dead man's switch is pinged
/// every `healthcheck_interval`: its URL while healthy, URL/fail while a problem is told.
package actor NotifyService: Service {
    package struct Options: Sendable, Equatable {
        package var webhook: String?
        package var webhookFormat: Settings.Notify.WebhookFormat
        package var command: String?
        package var healthcheckURL: String?
        package var healthcheckInterval: TimeInterval
        package var policy: NotifyPolicy.Config
        /// What the S3 threshold is, to wake when it is crossed.
        package var rules: AttentionRules
        package var device: String
        package var trust: TLSTrust

        /// The tests' knob: `PHOTOLALAD_NOTIFY_CLEAR_AFTER` (a duration) shortens the 30 s a
        /// problem must stay clear before `recovered` is sent.
        package static let clearVariable = "PHOTOLALAD_NOTIFY_CLEAR_AFTER"

        /// The one mapping from settings, at start and on reload.
        package init(_ settings: Settings, environment: [String: String] = ProcessInfo.processInfo.environment) {
            let n = settings.notify
            webhook = n.webhook
            webhookFormat = n.webhookFormat
            command = n.command
            healthcheckURL = n.healthcheckURL
            healthcheckInterval = Units.seconds(n.healthcheckInterval)
            var policy = NotifyPolicy.Config(repeatInterval: Units.seconds(n.repeatInterval), dailySummary: n.dailySummary)
            if let d = environment[Self.clearVariable].flatMap(Units.parseDuration) { policy.clearAfter = Units.seconds(d) }
            self.policy = policy
            rules = AttentionRules(environment: environment)
            device = settings.account.deviceName ?? HostName.current()
            trust = TLSTrust(caFile: settings.tls.caFile)
        }

        package var channels: [ChannelKind] {
            [webhook.map { _ in .webhook }, command.map { _ in .command }, healthcheckURL.map { _ in .healthcheck }].compactMap { $0 }
        }
    }

    private let source: any NotifySource
    private let store: any NotifyMemoryStore
    private let logger: Logger
    private var options: Options
    /// nil until `run()` read what was told before the last stop.
    private var policy: NotifyPolicy?
    private var webhookBox = Outbox<NotifyEvent>()
    private var commandBox = Outbox<NotifyEvent>()
    private var healthBox = Outbox<HealthSignal>(coalescing: true)
    private var nextPingAt: Date?
    /// What the problems told say, for the pings sent while they last.
    private var problemText = ""
    /// When the S3 threshold is crossed, as of the last status: the items change then with
    /// no change to the status.
    private var lastThreshold: Date?
    private var http: HTTPClient?
    private var lastStoreProblem: String?
    /// Whether each channel's last attempt failed.
    private var lastFailed: [ChannelKind: Bool] = [:]
    private let watchSignal = ChangeFeed()
    private let sendSignal = ChangeFeed()
    /// A channel that stops delivering, and every notification given up (cli.md "audit":
    /// `notify.failed`).
    private let audit: (any AuditRecorder)?

    package init(options: Options, source: any NotifySource, store: any NotifyMemoryStore, logger: Logger,
                 audit: (any AuditRecorder)? = nil) {
        self.options = options
        self.source = source
        self.store = store
        self.logger = logger
        self.audit = audit
        Self.registerSecrets(options)
    }

    /// A Slack or Healthchecks URL is itself the secret, and a URL's password is one: no
    /// log line or audit record holds them, whatever a receiver's answer quotes.
    private static func registerSecrets(_ options: Options) {
        for url in [options.webhook, options.healthcheckURL].compactMap({ $0 }) {
            SecretRedactor.shared.register(url)
            SecretRedactor.shared.register(URLComponents(string: url)?.password)
        }
    }

    package func apply(_ new: Options) async {
        let old = options
        Self.registerSecrets(new)
        options = new
        policy?.config = new.policy
        if new.webhook != old.webhook || new.webhookFormat != old.webhookFormat { webhookBox.clear() }
        if new.command != old.command { commandBox.clear() }
        if new.healthcheckURL != old.healthcheckURL || new.healthcheckInterval != old.healthcheckInterval {
            healthBox.clear()
            nextPingAt = nil
        }
        watchSignal.changed()
        sendSignal.changed()
    }

    package func run() async throws {
        policy = await NotifyPolicy(config: options.policy, memory: loadMemory())
        let changes = source.changes()
        try? await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                // The status feed folds into the watcher's one "look again".
                group.addTask { [watchSignal = self.watchSignal] in
                    for await _ in changes { watchSignal.changed() }
                }
                group.addTask { await self.watch() }
                for kind in ChannelKind.allCases {
                    group.addTask { await self.deliver(kind) }
                }
            }
        }
        try? await http?.shutdown()
        http = nil
    }

    // MARK: deciding

    private func watch() async {
        while !Task.isCancelled {
            let since = watchSignal.generation
            let evaluated = Date()
            await evaluate(now: evaluated)
            let deadline = nextWake(now: Date())
            await watchSignal.wait(since: since, until: deadline)
            // Woken by a change: a burst of them costs one evaluation a second. A deadline
            // (a repeat, a recovery's 30 s, a ping) is kept to the moment.
            let woken = Date()
            if deadline.map({ woken < $0 }) ?? true, woken < evaluated.addingTimeInterval(1) {
                try? await Task.sleep(for: .milliseconds(Int64(evaluated.addingTimeInterval(1).timeIntervalSince(woken) * 1000)))
            }
        }
    }

    private func nextWake(now: Date) -> Date? {
        guard !options.channels.isEmpty, let policy else { return nil }
        // A few milliseconds late rather than early: a timer converted from a Date may
        // fire a hair before it, when the policy would not yet see the deadline.
        let dates = [policy.nextDeadline(now: now), lastThreshold, nextPingAt].compactMap { $0 }
        return dates.min().map { max($0, now).addingTimeInterval(0.02) }
    }

    private func evaluate(now: Date) async {
        guard !options.channels.isEmpty, policy != nil else { return }
        let status = await source.status()
        lastThreshold = options.rules.nextChange(for: status, now: now)
        guard var policy = self.policy else { return }
        let decisions = policy.step(attention: status.attention, now: now)
        self.policy = policy
        if !decisions.isEmpty { await saveMemory(policy.memory) }
        // Kept through a recovery's 30 s, when the switch still hears /fail.
        if !status.attention.isEmpty { problemText = status.attention.map(\.sentence).joined(separator: " ") }
        let scrubber = NotifyScrubber(userIds: [status.account.userId])
        let brief = NotifyEvent.Brief(status)
        var told = false
        for decision in decisions {
            let event: NotifyEvent
            switch decision {
            case .problem(let item, let repeated):
                event = NotifyEvent.problem(item, device: options.device, at: now, status: brief)
                logger.notice(repeated ? "notifying again: still \(item.reason.rawValue)" : "notifying: \(item.reason.rawValue)")
            case .recovered(let reason, let subject):
                event = NotifyEvent.recovered(reason, subject: subject, device: options.device, at: now, status: brief)
                logger.notice("notifying: \(reason.rawValue) cleared")
            case .summary:
                let day = await source.uploaded(since: policy.startOfDay(now)) ?? DaySummary(files: 0, bytes: 0)
                event = NotifyEvent.summary(day, device: options.device, at: now, status: status)
                logger.info("notifying: the day's summary")
            }
            enqueue(scrubber.scrub(event), now: now)
            told = told || event.event != .summary
        }
        if options.healthcheckURL != nil {
            let hasProblems = self.policy?.hasProblems ?? false
            if told || nextPingAt.map({ now >= $0 }) ?? true {
                // What a problem or its end says goes out with retries; a periodic ping once.
                let signal: HealthSignal = hasProblems ? .fail(scrubber.scrub(problemText)) : .ok
                healthBox.add(signal, now: now, retries: told)
                nextPingAt = now.addingTimeInterval(options.healthcheckInterval)
            }
        }
        sendSignal.changed()
    }

    private func enqueue(_ event: NotifyEvent, now: Date) {
        if options.webhook != nil { webhookBox.add(event, now: now) }
        if options.command != nil { commandBox.add(event, now: now) }
    }

    private func loadMemory() async -> NotifyPolicy.Memory {
        do {
            guard let text = try await store.loadMemory() else { return NotifyPolicy.Memory() }
            return try JSONDecoder().decode(NotifyPolicy.Memory.self, from: Data(text.utf8))
        } catch {
            // Forgetting what was told costs at worst one event sent twice.
            logger.warning("what notifications told before cannot be read (\(error)): starting afresh")
            return NotifyPolicy.Memory()
        }
    }

    private func saveMemory(_ memory: NotifyPolicy.Memory) async {
        do {
            let data = try JSONEncoder().encode(memory)
            try await store.saveMemory(String(decoding: data, as: UTF8.self))
            lastStoreProblem = nil
        } catch {
            // The events still go out (a full disk is one of them); after a restart some may be told again.
            let why = "\(error)"
            if why != lastStoreProblem { logger.warning("cannot remember which notifications were sent: \(why)") }
            lastStoreProblem = why
        }
    }

    // MARK: sending

    /// One channel's loop: the head of its outbox when due, else wait.
    private func deliver(_ kind: ChannelKind) async {
        while !Task.isCancelled {
            let since = sendSignal.generation
            let now = Date()
            switch next(kind, now: now) {
            case .idle:
                await sendSignal.wait(since: since, until: nil as Date?)
            case .wait(let until):
                await sendSignal.wait(since: since, until: until)
            case .event(let event, let send):
                let attempt = await send(event)
                guard !Task.isCancelled else { return }
                recordEvent(kind, event, attempt)
            case .health(let signal, let send):
                let attempt = await send(signal)
                guard !Task.isCancelled else { return }
                recordHealth(signal, attempt)
            }
        }
    }

    private enum Job {
        case idle
        case wait(Date)
        case event(NotifyEvent, @Sendable (NotifyEvent) async -> Attempt)
        case health(HealthSignal, @Sendable (HealthSignal) async -> Attempt)
    }

    private func next(_ kind: ChannelKind, now: Date) -> Job {
        switch kind {
        case .webhook:
            guard let url = options.webhook else { return .idle }
            switch webhookBox.next(now: now) {
            case .idle: return .idle
            case .wait(let until): return .wait(until)
            case .send(let event):
                let sender = WebhookSender(url: url, format: options.webhookFormat, http: NotifyHTTP(http: client(), trust: options.trust))
                return .event(event, { await sender.send($0) })
            }
        case .command:
            guard let path = options.command else { return .idle }
            switch commandBox.next(now: now) {
            case .idle: return .idle
            case .wait(let until): return .wait(until)
            case .send(let event):
                let sender = CommandSender(path: path)
                return .event(event, { await sender.send($0) })
            }
        case .healthcheck:
            guard let url = options.healthcheckURL else { return .idle }
            switch healthBox.next(now: now) {
            case .idle: return .idle
            case .wait(let until): return .wait(until)
            case .send(let signal):
                let sender = HealthcheckSender(url: url, http: NotifyHTTP(http: client(), trust: options.trust))
                return .health(signal, { await sender.send($0) })
            }
        }
    }

    private func recordEvent(_ kind: ChannelKind, _ event: NotifyEvent, _ attempt: Attempt) {
        let now = Date()
        var box = kind == .webhook ? webhookBox : commandBox
        let hadFailed = box.lastError != nil
        var dropped = false
        if attempt.ok {
            box.succeeded(event, now: now)
        } else {
            dropped = box.failed(event, attempt.answer, now: now, random: .random(in: 0..<1))
        }
        if kind == .webhook { webhookBox = box } else { commandBox = box }
        count(kind, attempt, dropped: dropped)
        report(kind, what: "\(event.event.rawValue) \(event.reason ?? "")", attempt, dropped: dropped, recovered: hadFailed && attempt.ok)
    }

    private func recordHealth(_ signal: HealthSignal, _ attempt: Attempt) {
        let hadFailed = healthBox.lastError != nil
        var dropped = false
        if attempt.ok {
            healthBox.succeeded(signal, now: Date())
        } else {
            dropped = healthBox.failed(signal, attempt.answer, now: Date(), random: .random(in: 0..<1))
        }
        count(.healthcheck, attempt, dropped: dropped)
        let what = switch signal {
        case .ok: "ping"
        case .fail: "ping /fail"
        case .log: "ping /log"
        }
        report(.healthcheck, what: what, attempt, dropped: dropped, recovered: hadFailed && attempt.ok)
    }

    private func count(_ kind: ChannelKind, _ attempt: Attempt, dropped: Bool) {
        DaemonCounter.notifications.increment(kind.rawValue, attempt.ok ? "sent" : "failed")
        if dropped { DaemonCounter.notifications.increment(kind.rawValue, "dropped") }
    }

    private func report(_ kind: ChannelKind, what: String, _ attempt: Attempt, dropped: Bool, recovered: Bool) {
        let metadata: Logger.Metadata = ["channel": "\(kind.rawValue)", "answer": "\(attempt.answer)"]
        // The trail hears a channel's first failure (not each retry of a channel already
        // failing: a dead receiver retried for a day would fill it) and every give-up.
        let newlyFailing = !attempt.ok && lastFailed[kind] != true
        lastFailed[kind] = !attempt.ok
        if newlyFailing || dropped {
            audit?.record(AuditEvent(.notifyFailed, by: .daemon, .failed, [
                "channel": .string(kind.rawValue), "what": .string(what), "answer": .string(attempt.answer), "gaveUp": .bool(dropped),
            ]))
        }
        if attempt.ok {
            if recovered { logger.notice("notifications by \(kind.rawValue) go through again", metadata: metadata) }
            logger.debug("notification sent: \(what)", metadata: metadata)
        } else if dropped {
            logger.error("notification given up: \(what) by \(kind.rawValue)", metadata: metadata)
        } else {
            logger.warning("notification not delivered yet: \(what) by \(kind.rawValue); retrying", metadata: metadata)
        }
    }

    /// Made on first use (never in `init`), shut down at the end of `run()`.
    private func client() -> HTTPClient {
        if let http { return http }
        let made = NotifyHTTP.makeClient()
        http = made
        return made
    }

    // MARK: what others ask

    /// `photolalactl notify --test`: a test event through every configured channel, once,
    /// outside the outboxes, and what each answered.
    package func test() async -> NotifyTestReport {
        let status = await source.status()
        let now = Date()
        let event = NotifyScrubber(userIds: [status.account.userId]).scrub(
            NotifyEvent.test(device: options.device, at: now, status: NotifyEvent.Brief(status)))
        var jobs: [(ChannelKind, @Sendable () async -> Attempt)] = []
        if let url = options.webhook {
            let sender = WebhookSender(url: url, format: options.webhookFormat, http: NotifyHTTP(http: client(), trust: options.trust))
            jobs.append((.webhook, { await sender.send(event) }))
        }
        if let path = options.command {
            let sender = CommandSender(path: path)
            jobs.append((.command, { await sender.send(event) }))
        }
        if let url = options.healthcheckURL {
            let sender = HealthcheckSender(url: url, http: NotifyHTTP(http: client(), trust: options.trust))
            jobs.append((.healthcheck, { await sender.send(.log("\(event.title): \(event.message)")) }))
        }
        let answers = await withTaskGroup(of: (ChannelKind, Attempt).self) { group in
            for (kind, job) in jobs { group.addTask { (kind, await job()) } }
            var out: [ChannelKind: Attempt] = [:]
            for await (kind, attempt) in group { out[kind] = attempt }
            return out
        }
        let results = jobs.map { kind, _ in
            NotifyTestReport.Result(channel: kind.rawValue, ok: answers[kind]?.ok ?? false, answer: answers[kind]?.answer ?? "no answer")
        }
        for r in results {
            logger.notice("notify --test by \(r.channel): \(r.ok ? "delivered" : "failed")", metadata: ["answer": "\(r.answer)"])
        }
        return NotifyTestReport(results: results)
    }

    package func contribute(to s: inout DaemonStatus) {
        var per: [DaemonStatus.Notify.Channel] = []
        func add(_ kind: ChannelKind, lastSentAt: Date?, lastError: String?, pending: Int, sent: Int, dropped: Int) {
            per.append(.init(channel: kind.rawValue, lastSentAt: lastSentAt.map(Timestamp.string), lastError: lastError,
                             pending: pending, sent: sent, dropped: dropped))
        }
        for kind in options.channels {
            switch kind {
            case .webhook: add(kind, lastSentAt: webhookBox.lastSentAt, lastError: webhookBox.lastError, pending: webhookBox.pending,
                               sent: webhookBox.sent, dropped: webhookBox.dropped)
            case .command: add(kind, lastSentAt: commandBox.lastSentAt, lastError: commandBox.lastError, pending: commandBox.pending,
                               sent: commandBox.sent, dropped: commandBox.dropped)
            case .healthcheck: add(kind, lastSentAt: healthBox.lastSentAt, lastError: healthBox.lastError, pending: healthBox.pending,
                                   sent: healthBox.sent, dropped: healthBox.dropped)
            }
        }
        let last = [webhookBox.lastSentAt, commandBox.lastSentAt, healthBox.lastSentAt].compactMap { $0 }.max()
        let failing = per.first { $0.lastError != nil }
        s.notify = DaemonStatus.Notify(channels: options.channels.map(\.rawValue), lastSentAt: last.map(Timestamp.string),
                                       lastError: failing.map { "\($0.channel): \($0.lastError ?? "")" }, perChannel: per)
    }
}
