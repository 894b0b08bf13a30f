import Bucket
import Foundation
import ManifestFormat
import PhotolalaCore
import Queue
import RestoreRelay
import RestoreWire

/// What a new catalog says between two full passes (app-catalog.md: the apps rewrite the
/// whole catalog at each star and unstar): its rows the mirror does not know are photos a
/// phone just put in the account, each asked its size and class with one HEAD (a catalog
/// row is app-writable: its size bounds nothing); rows gone since the last catalog it read
/// may be unstars, which delete the object: their copies are HEADed, and those the account
/// lost are kept or trashed at once, not a day later. Objects no catalog row names
/// (videos, other NASes' formats the apps do not show) wait for the full listing.
package struct MirrorCatalogCheck: Sendable {
    let database: QueueDatabase
    let session: BucketSession
    let userId: String
    let budget: BucketBudget
    let include: Settings.Mirror.Include
    let onCloudDelete: Settings.Mirror.OnCloudDelete
    let folder: String
    /// HEADs in flight at once.
    var concurrency = 8
    static let maxNew = 100_000

    package init(database: QueueDatabase, session: BucketSession, userId: String, budget: BucketBudget, include: Settings.Mirror.Include,
                 onCloudDelete: Settings.Mirror.OnCloudDelete, folder: String) {
        self.database = database
        self.session = session
        self.userId = userId
        self.budget = budget
        self.include = include
        self.onCloudDelete = onCloudDelete
        self.folder = folder
    }

    package struct Result: Sendable, Equatable {
        package var new = 0
        package var lost = 0
        package var trash: [MirrorEntry] = []
        /// Rows whose objects the bucket does not hold (yet): not asked again until the next full pass.
        package var absent: Set<MD5Value> = []
        package var failure: String?
        package var interrupted = false
    }

    /// - Parameters:
    ///   - previous: the last catalog read (nil: none since the start: every row is looked at).
    ///   - absent: rows already found to have no object.
    package func run(new table: CatalogDates, previous: CatalogDates?, absent: Set<MD5Value>, now: @Sendable () -> Date) async -> Result {
        var result = Result()
        result.absent = absent
        var batch: [(MD5Value, CatalogDates.Entry)] = []
        do {
            // Beyond this many new rows at once (a first catalog of a big account), the rest
            // waits for the full pass, which lists them anyway: memory stays bounded.
            try table.forEach { md5, row in
                if let previous, (try? previous.lookup(md5)) != nil { return true }
                guard batch.count < Self.maxNew else { return false }
                batch.append((md5, row))
                return true
            }
        } catch {
            result.failure = "the catalog's table could not be read: \(error)"
            return result
        }
        for start in stride(from: 0, to: batch.count, by: 1000) {
            let chunk = Array(batch[start..<min(batch.count, start + 1000)])
            do {
                try await added(chunk, into: &result, now: now)
            } catch {
                result.failure = "\(error)"
                return result
            }
            if result.interrupted { return result }
        }
        if let previous {
            var gone: [MD5Value] = []
            do {
                try previous.forEach { md5, _ in
                    if (try? table.lookup(md5)) == nil { gone.append(md5) }
                    return gone.count < 10_000
                }
            } catch {
                result.failure = "the catalog's table could not be read: \(error)"
                return result
            }
            await removed(gone, into: &result, now: now)
        }
        return result
    }

    /// Rows the mirror may not know.
    private func added(_ rows: [(MD5Value, CatalogDates.Entry)], into result: inout Result, now: @Sendable () -> Date) async throws {
        let known = try await database.mirrorEntries(md5s: rows.map(\.0))
        let own = include == .others ? try await database.heldByWatchedFiles(rows.map(\.0.hex), outside: folder) : [:]
        var saving: [MirrorEntry] = []
        var ask: [(MD5Value, CatalogDates.Entry)] = []
        for (md5, row) in rows {
            if let entry = known[md5] {
                if let dated = MirrorPlan.dated(entry, catalogDate: row.date, ext: row.ext) { saving.append(dated) }
            } else if let size = own[md5.hex] {
                // This NAS's own photo, just published: counted in the account, not asked
                // (its size is the file's; the next listing says the rest).
                saving.append(MirrorEntry(md5: md5, size: size, catalogDate: row.date, ext: row.ext, state: .own))
            } else if !result.absent.contains(md5) {
                ask.append((md5, row))
            }
        }
        let answers = await heads(ask.map(\.0))
        for (md5, row) in ask {
            switch answers[md5] {
            case .some(.some(let info)):
                let listed = MirrorPlan.Listed(md5: md5, size: info.size, storageClass: info.storageClass ?? "STANDARD",
                                               modified: info.lastModified.flatMap(MirrorInventory.seconds))
                guard case .insert(var e) = MirrorPlan.listed(listed, entry: nil, own: false, include: include) else { continue }
                e.catalogDate = row.date
                e.ext = row.ext ?? ExportFormat.ext(catalogFormat: nil, originalFormat: info.originalFormat, contentType: info.contentType)
                saving.append(e)
                result.new += 1
            case .some(.none):
                result.absent.insert(md5)
            case .none:
                // Not answered (S3 failing, a stop): the full pass will find it.
                continue
            }
        }
        try await database.applyMirror(saving: saving, forgetting: [], now: now())
    }

    /// Rows the new catalog dropped: a copy whose object is gone too is the account's loss.
    private func removed(_ md5s: [MD5Value], into result: inout Result, now: @Sendable () -> Date) async {
        guard let entries = try? await database.mirrorEntries(md5s: md5s) else { return }
        let look = entries.values.filter { $0.state.isPresent && !$0.gone }.map(\.md5)
        let answers = await heads(look)
        var saving: [MirrorEntry] = []
        for md5 in look {
            guard case .some(.none) = answers[md5], let entry = entries[md5] else { continue }
            switch MirrorPlan.lost(entry, onCloudDelete: onCloudDelete) {
            case .mark(let e): saving.append(e)
            case .trash(let e): result.trash.append(e)
            case .forget, .none: continue
            }
            result.lost += 1
        }
        try? await database.applyMirror(saving: saving, forgetting: [], now: now())
    }

    /// One HEAD per object, `concurrency` at a time: the answer (nil inside: no such key),
    /// or nothing when it could not be asked.
    private func heads(_ md5s: [MD5Value]) async -> [MD5Value: S3Client.ObjectInfo?] {
        guard !md5s.isEmpty else { return [:] }
        let prefix = "photos/\(userId)/"
        let (session, budget) = (self.session, self.budget)
        return await withTaskGroup(of: (MD5Value, S3Client.ObjectInfo??).self) { group in
            var next = 0
            func launch() {
                guard next < md5s.count else { return }
                let md5 = md5s[next]
                next += 1
                group.addTask {
                    let key = prefix + md5.hex + ".dat"
                    do {
                        let info = try await session.perform(under: prefix, budget: budget) { bucket throws(S3Error) in
                            try await bucket.headObject(key: key)
                        }
                        return (md5, .some(info))
                    } catch {
                        return (md5, .none)
                    }
                }
            }
            for _ in 0..<min(concurrency, md5s.count) { launch() }
            var out: [MD5Value: S3Client.ObjectInfo?] = [:]
            for await (md5, answer) in group {
                if let answer { out[md5] = answer }
                launch()
            }
            return out
        }
    }
}
