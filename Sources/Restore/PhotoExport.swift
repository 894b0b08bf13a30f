import Bucket
import Control
import Digests
import Dispatch
import Foundation
import Logging
import ManifestFormat
import NIOCore
import PhotolalaCore
import Previews
import Synchronization

/// The daemon's side of `photolalactl restore --by-date` (privacy.md "Export every photo
/// of the account"): lists `photos/{userId}/` afresh — whatever any manifest says, and
/// without the account key — and tells the command, per object in key order, its size,
/// storage class, time, the catalog's date and the extension it gets (`ExportLine`). The
/// apps' catalog is read as app-catalog.md says (the pointer, the snapshot it names, its
/// MD5 checked) into a table on disk (`CatalogDates`); an object the catalog does not
/// name is asked its content type and `original-format` (HEAD), and when those do not
/// say, its first bytes are read. The objects themselves are relayed by the restore's
/// `GET /v1/restore/object`; the command names and writes the files.
struct PhotoExport: Sendable {
    let session: BucketSession
    let userId: String
    let budget: BucketBudget
    /// Where the catalog's copy and its table go (the state directory).
    let directory: String
    /// HEADs (and first-bytes reads) in flight at once.
    let concurrency: Int
    /// A snapshot larger than this is not read (the dates come from the objects' times).
    var maxCatalogBytes: Int64 = 2 << 30
    /// How often the stream says it is still there while the catalog is read.
    var keepAlive: Duration = .seconds(10)
    let logger: Logger

    private var photos: String { "photos/\(userId)/" }
    private var catalogs: String { "catalogs/\(userId)/" }

    /// `GET /v1/restore/export`.
    func listing() -> ControlResponse {
        .stream { writer in
            do {
                try await writer.begin(contentType: "text/plain", contentLength: nil)
                let dates: CatalogDates?
                switch try await catalog(writer) {
                case .success(let table):
                    dates = table
                    let state = table.map { ExportLine.Catalog.read(rows: $0.counts.rows, malformed: $0.counts.malformed) } ?? ExportLine.Catalog.none
                    try await writer.write(Array(ExportLine.catalog(state).text.utf8))
                case .failure(let unreadable):
                    dates = nil
                    logger.notice("an export goes on without the apps' catalog: \(unreadable.why)")
                    try await writer.write(Array(ExportLine.catalog(.unreadable(unreadable.why)).text.utf8))
                }
                try await objects(dates, writer)
                try await writer.write(Array(ExportLine.end.text.utf8))
                try await writer.finish()
            } catch let failure as Failure {
                logger.warning("an export's listing stopped: \(failure.why)")
                try? await writer.write(Array(ExportLine.fail(failure.why).text.utf8))
                try? await writer.finish()
            } catch {
                // The command went away.
                logger.info("an export's listing was not taken whole: \(error)")
            }
        }
    }

    /// Why the export cannot go on (the bucket could not be read): the command says so.
    typealias Failure = AppCatalogCopy.Failure

    /// Why the catalog is of no use: the export goes on, dated by the objects' times.
    typealias Unreadable = AppCatalogCopy.Unreadable

    // MARK: the apps' catalog

    /// The table of the catalog's rows (nil: the account has none), or why it is unreadable.
    private func catalog(_ writer: ControlStreamWriter) async throws -> Result<CatalogDates?, Unreadable> {
        let keepAlive = self.keepAlive
        let copy = AppCatalogCopy(session: session, userId: userId, budget: budget, directory: directory, maxCatalogBytes: maxCatalogBytes)
        return try await withThrowingTaskGroup(of: Result<CatalogDates?, Unreadable>?.self) { group in
            group.addTask { try await copy.read().map { $0?.dates } }
            // The command reads with a time-out; a big catalog on a slow uplink takes longer.
            group.addTask {
                while true {
                    try await Task.sleep(for: keepAlive)
                    try await writer.write(Array(ExportLine.wait.text.utf8))
                }
            }
            defer { group.cancelAll() }
            while let next = try await group.next() {
                if let next { return next }
            }
            throw CancellationError()
        }
    }

    // MARK: the objects

    /// Every key under `photos/{userId}/`, a page at a time, each page's unknown formats
    /// asked `concurrency` at a time.
    private func objects(_ dates: CatalogDates?, _ writer: ControlStreamWriter) async throws {
        let prefix = photos
        var token: String?
        repeat {
            let page: S3Client.ListPage
            do {
                page = try await session.perform(under: prefix, budget: budget) { [token] bucket throws(S3Error) in
                    try await bucket.listObjects(prefix: prefix, continuationToken: token)
                }
            } catch {
                throw Failure(why: "\(prefix) could not be listed: \(error); run the command again")
            }
            var lines = [ExportLine?](repeating: nil, count: page.objects.count)
            var unknown: [(Int, ExportName.Object)] = []
            for (i, listed) in page.objects.enumerated() {
                guard let md5 = Self.md5(key: listed.key, prefix: prefix) else {
                    lines[i] = .skipped(key: listed.key, why: "not a photo's object (\(prefix){md5}.dat): left alone")
                    continue
                }
                let entry: CatalogDates.Entry?
                do {
                    entry = try dates?.lookup(md5)
                } catch {
                    throw Failure(why: "the apps' catalog could not be read back: \(error)")
                }
                // Sizes before bytes: an object the catalog gives another size than the
                // listing's was replaced in the bucket (the row is the photo the apps
                // uploaded); it is not read at all.
                if let size = entry?.size, size != listed.size {
                    lines[i] = .skipped(key: listed.key, why: "holds \(listed.size) bytes in the bucket, but the apps' catalog says the photo "
                                        + "of this MD5 has \(size): it was replaced in the bucket; not exported")
                    continue
                }
                let object = ExportName.Object(md5: md5, size: listed.size, storageClass: listed.storageClass,
                                               modified: listed.lastModified.flatMap(Self.seconds), catalogDate: entry?.date, ext: entry?.ext ?? "bin")
                if entry?.ext != nil { lines[i] = .object(object) } else { unknown.append((i, object)) }
            }
            for (i, line) in await formats(unknown) { lines[i] = line }
            try await writer.write(Array(lines.compactMap { $0?.text }.joined().utf8))
            token = page.nextContinuationToken
        } while token != nil
    }

    /// `photos/{userId}/{32 lowercase hex}.dat` → its MD5; anything else (another case, a
    /// folder, `..`, another suffix) nil.
    static func md5(key: String, prefix: String) -> MD5Value? {
        guard key.utf8.starts(with: prefix.utf8) else { return nil }
        let name = key.utf8.dropFirst(prefix.utf8.count)
        guard name.count == 36, name.suffix(4).elementsEqual(".dat".utf8) else { return nil }
        let hex = String(decoding: name.prefix(32), as: UTF8.self)
        guard ExportLine.isLowercaseMD5(hex) else { return nil }
        return MD5Value(hex: hex)
    }

    private static func seconds(_ date: Date) -> Int64? {
        let t = date.timeIntervalSince1970.rounded(.down)
        return t.isFinite && abs(t) < 9e15 ? Int64(t) : nil
    }

    /// The objects the catalog gives no format for: HEAD, then (when neither the content
    /// type nor `original-format` says) the first bytes.
    private func formats(_ objects: [(Int, ExportName.Object)]) async -> [(Int, ExportLine)] {
        guard !objects.isEmpty else { return [] }
        let limit = concurrency
        return await withTaskGroup(of: (Int, ExportLine).self) { group in
            var next = 0
            func launch() {
                guard next < objects.count else { return }
                let (i, object) = objects[next]
                next += 1
                group.addTask { (i, await self.format(of: object)) }
            }
            for _ in 0..<min(limit, objects.count) { launch() }
            var out: [(Int, ExportLine)] = []
            for await answer in group {
                out.append(answer)
                launch()
            }
            return out
        }
    }

    private func format(of object: ExportName.Object) async -> ExportLine {
        let key = photos + object.md5.hex + ".dat"
        var found = object
        do {
            let info = try await session.perform(under: photos, budget: budget) { bucket throws(S3Error) in try await bucket.headObject(key: key) }
            guard let info else { return .skipped(key: key, why: "gone from the bucket while it was listed") }
            if let ext = ExportFormat.ext(catalogFormat: nil, originalFormat: info.originalFormat, contentType: info.contentType) {
                found.ext = ext
            } else if info.needsRestore || info.size == 0 {
                // Its bytes cannot be read before it is brought back from the archive.
                found.ext = "bin"
            } else {
                found.ext = ExportFormat.ext(head: try await head(key, size: info.size))
            }
            return .object(found)
        } catch {
            return .skipped(key: key, why: "could not be asked what it is (\(error)); run the command again")
        }
    }

    /// The object's first bytes, as many as the format's sniffing looks at.
    private func head(_ key: String, size: Int64) async throws(S3Error) -> [UInt8] {
        let range: ClosedRange<Int64> = 0...(min(size, Int64(PhotoFormat.sniffLength)) - 1)
        return try await session.perform(under: photos, budget: budget) { bucket throws(S3Error) in
            let collected = Mutex<[UInt8]>([])
            _ = try await bucket.getObject(key: key, range: range, expectedBytes: Int64(range.count), onHead: nil) { buffer in
                collected.withLock { $0 += Array(buffer: buffer) }
            }
            return collected.withLock { $0 }
        }
    }

    // MARK: the audit trail

    /// `POST /v1/restore/export/report`: an export's start and end, in the trail.
    static func record(_ request: ControlRequest, audit: (any AuditRecorder)?) -> ControlResponse {
        guard let report = try? ControlJSON.decode(ExportReport.self, from: request.body) else {
            return .error(400, "bad_request", "expected an export report")
        }
        var details: AuditDetails = [
            "byDate": true, "to": .string(report.to), "step": .string(report.step.rawValue),
            "objects": .int(Int64(report.objects)), "bytes": .int(report.bytes),
        ]
        var outcome = AuditOutcome.ok
        if report.step == .finished {
            for (name, n) in [("written", report.written), ("alreadyThere", report.alreadyThere), ("kept", report.kept),
                              ("failed", report.failed), ("skipped", report.skipped), ("waitingArchived", report.waitingArchived)] {
                details[name] = .int(Int64(n))
            }
            details["interrupted"] = .bool(report.interrupted)
            if report.failed > 0 || report.interrupted { outcome = .failed }
        }
        audit?.record(AuditEvent(.restore, by: .caller(uid: request.peer.uid), outcome, details))
        return .json(ControlReply(ok: true, message: "recorded"))
    }
}
