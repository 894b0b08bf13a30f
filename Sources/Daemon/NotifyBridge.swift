import Foundation
import Notify
import PhotolalaCore
import Queue

/// What the notify service reads and keeps, from the daemon: the status as
/// `photolalactl status` sees it, its change feed, the day's uploads, and the policy's
/// memory in the queue database's `setting` table.
struct NotifyBridge: NotifySource, NotifyMemoryStore {
    let core: DaemonCore

    func status() async -> DaemonStatus { await core.status() }

    func changes() -> AsyncStream<Void> { core.changes() }

    func uploaded(since date: Date) async -> DaySummary? {
        guard let day = try? await core.database.uploadedFiles(since: date) else { return nil }
        return DaySummary(files: day.files, bytes: day.bytes)
    }

    func loadMemory() async throws -> String? { try await core.database.setting(Self.key) }

    func saveMemory(_ text: String) async throws { try await core.database.setSetting(Self.key, text) }

    static let key = "notify.memory"
}
