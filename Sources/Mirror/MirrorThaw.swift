import Bucket
import Foundation
import Logging
import PhotolalaCore
import Queue

/// The mirror's archived objects (mirror.md): asked back from their storage class, looked
/// at until readable, then left to the pull. Through the stage's session and database.
struct MirrorThaw: Sendable {
    let database: QueueDatabase
    let session: BucketSession
    let userId: String
    let rule: ThawRule
    let onCloudDelete: Settings.Mirror.OnCloudDelete
    let clock: any DaemonClock
    let logger: Logger

    var prefix: String { "photos/\(userId)/" }

    /// With `thawArchived`, archived objects are asked back (Bulk) once; those asked back
    /// are looked at as `ThawRule` says, and fetched once readable. `changed`: the entries'
    /// counts changed.
    func run(thawArchived: Bool, changed: @Sendable () async -> Void) async {
        let now = clock.now()
        if thawArchived {
            let archived = (try? await database.mirrorEntries(in: [.archived], limit: 1000)) ?? []
            for entry in archived where !entry.gone && entry.thawAskedAt == nil && (entry.nextAttemptAt ?? 0) <= now.timeIntervalSince1970 {
                await ask(entry, changed: changed)
            }
        }
        let due = (try? await database.mirrorEntries(in: [.thawing], dueBy: now, limit: 1000)) ?? []
        for entry in due {
            let key = entry.key(userId: userId)
            let info: S3Client.ObjectInfo?
            do {
                info = try await session.perform(under: prefix, budget: MirrorService.budget) { bucket throws(S3Error) in try await bucket.headObject(key: key) }
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
                await ask(e, changed: changed)
                continue
            case .gone:
                if case .forget = MirrorPlan.lost(e, onCloudDelete: onCloudDelete) {
                    try? await database.applyMirror(saving: [], forgetting: [e.md5], now: now)
                }
                continue
            }
            try? await database.saveMirror(e, now: now)
        }
        if !due.isEmpty { await changed() }
    }

    private func ask(_ entry: MirrorEntry, changed: @Sendable () async -> Void) async {
        let key = prefix + entry.md5.hex + ".dat"
        let now = clock.now()
        var e = entry
        do {
            let answer = try await session.perform(under: prefix, budget: MirrorService.budget) { bucket throws(S3Error) in
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
            e.nextAttemptAt = now.addingTimeInterval(MirrorService.retry.delay(after: max(1, e.attempts + 1), random: .random(in: 0..<1))).timeIntervalSince1970
            e.attempts += 1
        }
        try? await database.saveMirror(e, now: now)
        await changed()
    }
}
