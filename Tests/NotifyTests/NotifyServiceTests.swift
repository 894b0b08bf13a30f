import BucketTesting
import Foundation
import Logging
import PhotolalaCore
import Synchronization
import Testing
import Notify

/// The service in-process: a status with attention items in, a real command out, and
/// what it remembers written only when it told something.
@Suite struct NotifyServiceTests {
    final class Source: NotifySource, Sendable {
        let current = Mutex(DaemonStatus(state: .running))
        let feed = ChangeFeed()
        func status() async -> DaemonStatus { current.withLock { $0 } }
        func changes() -> AsyncStream<Void> { feed.changes() }
        func uploaded(since date: Date) async -> DaySummary? { nil }
        func set(_ edit: (inout DaemonStatus) -> Void) {
            current.withLock { edit(&$0) }
            feed.changed()
        }
    }

    final class Store: NotifyMemoryStore, Sendable {
        let saved = Mutex<[String]>([])
        func loadMemory() throws -> String? { saved.withLock { $0.last } }
        func saveMemory(_ text: String) throws { saved.withLock { $0.append(text) } }
    }

    func hook() throws -> (path: String, dir: URL) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("notify-svc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("hook").path
        try "#!/bin/sh\necho \"$PHOTOLALA_EVENT $PHOTOLALA_REASON\" >> \"$(dirname \"$0\")/events\"\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        return (path, dir)
    }

    func events(_ dir: URL) -> [String] {
        ((try? String(contentsOf: dir.appendingPathComponent("events"), encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    func waitFor(_ what: String, _ condition: () -> Bool) async throws {
        // Generous: a whole `swift test` on two busy cores can hold a test for a minute.
        let deadline = ContinuousClock.now + .seconds(90)
        while !condition() {
            guard ContinuousClock.now < deadline else { Issue.record("timed out waiting for \(what)"); return }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test func aProblemAndItsRecoveryThroughACommand() async throws {
        let (path, dir) = try hook()
        defer { try? FileManager.default.removeItem(at: dir) }
        var settings = Settings()
        settings.notify.command = path
        settings.account.deviceName = "nas"
        let source = Source()
        let store = Store()
        let service = NotifyService(options: .init(settings, environment: ["PHOTOLALAD_NOTIFY_CLEAR_AFTER": "500ms"]),
                                    source: source, store: store, logger: Logger(label: "test"))
        let running = Task { try await service.run() }
        defer { running.cancel() }

        try await Task.sleep(for: .milliseconds(300))
        #expect(events(dir).isEmpty)
        #expect(store.saved.withLock { $0.isEmpty }, "nothing told, nothing written")

        source.set { $0.attention = [AttentionRules.pauseItem(.quotaExceeded)!] }
        try await waitFor("the problem") { events(dir) == ["problem quotaExceeded"] }
        #expect(store.saved.withLock { $0.count } == 1)

        source.set { $0.attention = [] }
        try await waitFor("the recovery") { events(dir) == ["problem quotaExceeded", "recovered quotaExceeded"] }
        #expect(store.saved.withLock { $0.count } == 2)

        // The command ran; its channel records the delivery right after it returns.
        var s = DaemonStatus()
        let deadline = ContinuousClock.now + .seconds(90)
        repeat {
            s = DaemonStatus()
            await service.contribute(to: &s)
            if s.notify.perChannel.first?.pending == 0 { break }
            try await Task.sleep(for: .milliseconds(50))
        } while ContinuousClock.now < deadline
        #expect(s.notify.channels == ["command"] && s.notify.lastError == nil && s.notify.lastSentAt != nil)
        #expect(s.notify.perChannel == [.init(channel: "command", lastSentAt: s.notify.lastSentAt, pending: 0, sent: 2)])

        let report = await service.test()
        #expect(report.results == [.init(channel: "command", ok: true, answer: "exit 0")])
        #expect(events(dir).last == "test ")
    }

    @Test func aRestartRemembersWhatWasTold() async throws {
        let (path, dir) = try hook()
        defer { try? FileManager.default.removeItem(at: dir) }
        var settings = Settings()
        settings.notify.command = path
        let source = Source()
        source.set { $0.attention = [AttentionRules.pauseItem(.appleRevoked)!] }
        let store = Store()
        for _ in 0..<2 {
            let service = NotifyService(options: .init(settings, environment: [:]), source: source, store: store, logger: Logger(label: "test"))
            let running = Task { try await service.run() }
            try await waitFor("the problem told") { events(dir) == ["problem appleRevoked"] }
            // What was told is kept once the command has answered; then the stop.
            try await waitFor("the telling kept") { store.saved.withLock { $0.count } == 1 }
            try await Task.sleep(for: .milliseconds(1500))
            running.cancel()
            _ = try? await running.value
        }
        #expect(events(dir) == ["problem appleRevoked"], "the second start told nothing again")
        #expect(store.saved.withLock { $0.count } == 1)
    }

    @Test func aChannelThatStopsDeliveringIsInTheAuditTrailOnce() async throws {
        let (_, dir) = try hook()
        defer { try? FileManager.default.removeItem(at: dir) }
        // A receiver that fails every time: the outbox retries (2 s doubling), the trail hears it once.
        let path = dir.appendingPathComponent("broken").path
        try "#!/bin/sh\necho tried >> \"$(dirname \"$0\")/events\"\necho 'receiver down'\nexit 3\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        var settings = Settings()
        settings.notify.command = path
        let source = Source()
        let audit = CollectedAudit()
        let service = NotifyService(options: .init(settings, environment: [:]), source: source, store: Store(),
                                    logger: Logger(label: "test"), audit: audit)
        let running = Task { try await service.run() }
        defer { running.cancel() }
        source.set { $0.attention = [AttentionRules.pauseItem(.quotaExceeded)!] }
        try await waitFor("two attempts") { events(dir).count >= 2 }
        try await Task.sleep(for: .milliseconds(100))
        #expect(audit.all == [
            AuditEvent(.notifyFailed, by: .daemon, .failed, [
                "channel": "command", "what": "problem quotaExceeded", "answer": .string("\(path) exited with 3: receiver down"), "gaveUp": false,
            ]),
        ])
    }
}
