import BucketTesting
import Foundation
import Logging
import PhotolalaCore
import Queue
import Testing
import UnixSignals
import Daemon

/// A reload (SIGHUP) in the audit trail: systemd's, with what changed, or why the file was
/// refused and the old settings stayed.
@Suite struct ReloadAuditTests {
    @Test func aReloadIsRecordedAsSystemdsWithWhatChangedOrWhyNot() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("daemon-reload-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let config = dir.appendingPathComponent("photolalad.toml").path
        func write(_ text: String) throws { try text.write(toFile: config, atomically: true, encoding: .utf8) }
        var settings = Settings()
        settings.watch.folders = [dir.path]
        let core = try await DaemonCore(settings: settings, database: try QueueDatabase.open(path: dir.path + "/queue.db"),
                                  logger: Logger(label: "test"))
        let audit = CollectedAudit()
        let reload = ReloadService(core: core, configPath: config, notifier: SystemdNotifier(), logger: Logger(label: "test"),
                                   parts: [], signals: await UnixSignalsSequence(trapping: .sighup), audit: audit)

        try write("[watch]\nfolders = [\"\(dir.path)\"]\n")
        await reload.reload()
        try write("[watch]\nfolders = [\"\(dir.path)\"]\n[upload]\nconcurrency = 2\n[audit]\nmax_size = \"1MiB\"\n")
        await reload.reload()
        #expect(await core.settings.upload.concurrency == 2)
        try write("[watch]\nfolders = [\"\(dir.path)\"]\n[upload]\nconcurrency = \"many\"\n")
        await reload.reload()
        #expect(await core.settings.upload.concurrency == 2, "a bad file changes nothing")

        let events = audit.all
        #expect(events.count == 3)
        #expect(events[1] == AuditEvent(.configReload, by: .systemd, .ok, ["path": .string(config), "changed": "upload, audit"]))
        let failed = try #require(events.last)
        #expect(failed.kind == .configReload && failed.actor == .systemd && failed.outcome == .failed)
        #expect(failed.details["path"] == .string(config))
        let problem = try #require(failed.details["problem"]?.description)
        #expect(problem.contains("upload.concurrency") && !problem.contains("\n"), "\(problem)")
    }

    @Test func theChangedSectionsAreNamedInTheFilesWords() {
        var old = Settings()
        old.watch.folders = ["/a"]
        var new = old
        #expect(ReloadService.changedSections(old, new).isEmpty)
        new.notify.webhook = "https://hooks.example/x"
        new.credentials.appleCheckInterval = .seconds(60)
        #expect(ReloadService.changedSections(old, new) == ["credentials", "notify"])
    }
}
