import Bucket
import Foundation
import ManifestFormat
import PhotolalaCore
import Queue
import RestoreRelay

/// A full pass's listing of `photos/{userId}/` (1,000 keys a page, one transaction per
/// page, nothing held beyond a page): each key is compared with the mirror's entries
/// between the previous page's last key and this one's (S3 lists in key order, and a key
/// is the MD5), new objects are recorded, and entries the page lacks are objects the
/// account lost. What would move into `.trash/` is gathered and moved once the whole
/// listing is in, under `TrashGuard`. A quiet pass writes nothing.
package struct MirrorInventory: Sendable {
    let database: QueueDatabase
    let session: BucketSession
    let userId: String
    let budget: BucketBudget
    let include: Settings.Mirror.Include
    let onCloudDelete: Settings.Mirror.OnCloudDelete
    /// The mirror's folder: files below it do not make an object "own".
    let folder: String
    let catalog: CatalogDates?

    package init(database: QueueDatabase, session: BucketSession, userId: String, budget: BucketBudget,
                 include: Settings.Mirror.Include, onCloudDelete: Settings.Mirror.OnCloudDelete, folder: String, catalog: CatalogDates?) {
        self.database = database
        self.session = session
        self.userId = userId
        self.budget = budget
        self.include = include
        self.onCloudDelete = onCloudDelete
        self.folder = folder
        self.catalog = catalog
    }

    package struct Result: Sendable, Equatable {
        package var complete = false
        /// Why it stopped (nil when complete, or when it was only interrupted).
        package var failure: String?
        package var interrupted = false
        package var listed = 0
        package var new = 0
        package var lost = 0
        /// Copies to move into `.trash/`, gathered over the pass.
        package var trash: [MirrorEntry] = []
    }

    package var prefix: String { "photos/\(userId)/" }

    package func run(now: @Sendable () -> Date) async -> Result {
        var result = Result()
        let prefix = self.prefix
        var token: String?
        var previous: MD5Value?
        repeat {
            let page: S3Client.ListPage
            do throws(S3Error) {
                page = try await session.perform(under: prefix, budget: budget) { [token] bucket throws(S3Error) in
                    try await bucket.listObjects(prefix: prefix, continuationToken: token)
                }
            } catch {
                if error.kind == .cancelled || error.kind == .unavailable {
                    result.interrupted = true
                } else if error.kind == .forbidden {
                    result.failure = "S3 refused to list \(prefix) (403 \(error.code)): the backend's session policy does not allow s3:ListBucket, which the mirror needs"
                } else {
                    result.failure = "listing \(prefix) failed: \(error)"
                }
                return result
            }
            let listed = page.objects.compactMap { o -> MirrorPlan.Listed? in
                guard let md5 = Self.md5(key: o.key, prefix: prefix) else { return nil }
                return MirrorPlan.Listed(md5: md5, size: o.size, storageClass: o.storageClass, modified: o.lastModified.flatMap(Self.seconds))
            }
            // The page's last key bounds what it covers, whether or not it names a photo.
            let last = page.nextContinuationToken == nil ? nil : page.objects.last.flatMap { Self.md5(key: $0.key, prefix: prefix) }
                ?? listed.last?.md5
            do {
                try await apply(listed, after: previous, through: last, into: &result, now: now())
            } catch {
                result.failure = "the queue database: \(error)"
                return result
            }
            previous = last
            token = page.nextContinuationToken
            if token != nil && last == nil {
                // A page of keys that are no photo's: what it covers cannot be told, so
                // nothing past it is taken for lost.
                result.failure = "a listing page of \(prefix) held no photo's key; lost objects are looked for at the next pass"
                return result
            }
        } while token != nil
        result.complete = true
        return result
    }

    /// One page: its objects against the entries in (after, through] (nil: to the end).
    private func apply(_ listed: [MirrorPlan.Listed], after: MD5Value?, through: MD5Value?, into result: inout Result, now: Date) async throws {
        result.listed += listed.count
        var held = Dictionary(try await database.mirrorEntries(after: after, through: through).map { ($0.md5, $0) }, uniquingKeysWith: { a, _ in a })
        let own = include == .others ? try await database.heldByWatchedFiles(listed.map(\.md5.hex), outside: folder) : [:]
        var saving: [MirrorEntry] = []
        var forgetting: [MD5Value] = []
        for l in listed {
            let entry = held.removeValue(forKey: l.md5)
            var changed: MirrorEntry?
            switch MirrorPlan.listed(l, entry: entry, own: own[l.md5.hex] != nil, include: include) {
            case .none: changed = nil
            case .insert(let e):
                changed = e
                result.new += 1
            case .update(let e): changed = e
            }
            // Not written yet: the catalog names its date and extension.
            let base = changed ?? entry
            if let base, let dates = catalog, let row = try dates.lookup(base.md5),
               let dated = MirrorPlan.dated(base, catalogDate: row.date, ext: row.ext) {
                changed = dated
            }
            if let changed { saving.append(changed) }
        }
        for (_, entry) in held {
            switch MirrorPlan.lost(entry, onCloudDelete: onCloudDelete) {
            case .none: continue
            case .forget: forgetting.append(entry.md5)
            case .mark(let e): saving.append(e)
            case .trash(let e): result.trash.append(e)
            }
            result.lost += 1
        }
        try await database.applyMirror(saving: saving, forgetting: forgetting, now: now)
    }

    /// `photos/{userId}/{32 lowercase hex}.dat` → its MD5; anything else (another case, a
    /// folder, `..`, another suffix) nil: left alone.
    package static func md5(key: String, prefix: String) -> MD5Value? {
        guard key.utf8.starts(with: prefix.utf8) else { return nil }
        let name = key.utf8.dropFirst(prefix.utf8.count)
        guard name.count == 36, name.suffix(4).elementsEqual(".dat".utf8) else { return nil }
        let hex = name.prefix(32)
        guard hex.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else { return nil }
        return MD5Value(hex: String(decoding: hex, as: UTF8.self))
    }

    static func seconds(_ date: Date) -> Int64? {
        let t = date.timeIntervalSince1970.rounded(.down)
        return t.isFinite && abs(t) < 9e15 ? Int64(t) : nil
    }
}
