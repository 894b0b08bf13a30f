#if canImport(Glibc)
import Glibc
#endif
import Control
import Foundation
import ManifestFormat
import PhotolalaCore
import Synchronization

/// `photolalactl restore --by-date --to DIR`, the command's side (privacy.md "Export every
/// photo of the account"): takes the daemon's listing of every photo object of the
/// account, names each file by its date (`ExportName`), asks archived objects back, then
/// writes the files on `workers` threads through the restore's safe writer, each object
/// streamed from the daemon and its MD5 checked against its key before the rename. A
/// file already there with the same bytes is skipped, so a second run writes nothing.
/// No manifest and no key is needed: it is the way out for a user who lost every NAS.
package final class ExportRun: Sendable {
    package struct Request: Sendable, Equatable {
        package var to: String
        package var dryRun: Bool
        package var json: Bool
        package var workers: Int

        package init(to: String, dryRun: Bool, json: Bool, workers: Int = 10) {
            self.to = to
            self.dryRun = dryRun
            self.json = json
            self.workers = workers
        }
    }

    /// How a restore's session names the export in `status`.
    static let label = "every photo of the account, by date"

    private let client: ControlClient
    private let request: Request
    private let writer = RestoreWriter(overwrite: false, owners: .keep)
    private let transfer: TransferWorkers
    private let sessionId = Mutex<String?>(nil)

    package init(client: ControlClient, request: Request, interrupted: @escaping @Sendable () -> Bool) {
        self.client = client
        self.request = request
        transfer = TransferWorkers(client: client, rules: .init(noun: "export", gone: "left the bucket during the export", overwrite: false,
                                                                workers: request.workers),
                                   json: request.json, interrupted: interrupted)
    }

    /// Runs the export; prints as it goes and returns the summary (its exit code is cli.md's).
    package func run() throws(RestoreRun.Stop) -> ExportSummary {
        if !request.dryRun { try openSession() }
        let listing = try readListing()
        var summary = ExportSummary(to: request.to, dryRun: request.dryRun, catalog: listing.catalog)
        summary.skipped = listing.skipped.count
        summary.problems += listing.skipped.map { key, why in
            .init(kind: "skipped", path: RestorePlan.shown(key), message: "\(RestorePlan.shown(key)): \(why)")
        }
        let planned = ExportName.plan(listing.objects, to: request.to)
        for p in planned {
            switch p.dated {
            case .catalog: summary.dated.catalog += 1
            case .object: summary.dated.object += 1
            case .none: summary.dated.none += 1
            }
        }
        var items = planned.map(\.item)
        if !request.dryRun { items = try checked(items, into: &summary) }
        summary.files = items.count + summary.refused
        summary.bytes = items.reduce(0) { $0 + $1.version.size }
        say("\(request.dryRun ? "Would export" : "Exporting") \(items.count) photo\(items.count == 1 ? "" : "s") and video\(items.count == 1 ? "" : "s") "
            + "(\(Units.humanBytes(summary.bytes))) of this account into \(request.to), named by date")
        let statuses = try objectStatuses(planned, thaw: !request.dryRun)
        if request.dryRun {
            dryRun(planned, statuses: statuses, into: &summary)
        } else {
            tell(ExportReport(step: .started, to: request.to, objects: summary.files, bytes: summary.bytes, skipped: summary.skipped))
            transfer.write(items, statuses: statuses, writer: writer, report: { self.report(finished: false) }, into: &summary)
            report(finished: true)
            tell(ExportReport(step: .finished, to: request.to, objects: summary.files, bytes: summary.bytes, written: summary.restored,
                              alreadyThere: summary.alreadyThere, kept: summary.kept, failed: summary.failed + summary.refused, skipped: summary.skipped,
                              waitingArchived: summary.waitingArchived, interrupted: summary.interrupted))
        }
        return summary
    }

    // MARK: the listing

    private struct Listing {
        var catalog = ExportSummary.Catalog(state: "none")
        var objects: [ExportName.Object] = []
        var skipped: [(String, String)] = []
    }

    private func readListing() throws(RestoreRun.Stop) -> Listing {
        var streaming = client
        streaming.timeout = 300
        var listing = Listing()
        var reader = ExportLineReader()
        var ended = false
        var failure: String?
        let answer = try RestoreRun.Stop.streamed("the bucket's listing") {
            try streaming.stream(.restoreExport) { bytes in
                for line in try reader.feed(bytes) {
                    switch line {
                    case .wait: break
                    case .catalog(.none): listing.catalog = .init(state: "none")
                    case .catalog(.read(let rows, let malformed)): listing.catalog = .init(state: "read", rows: rows, malformed: malformed)
                    case .catalog(.unreadable(let why)): listing.catalog = .init(state: "unreadable", message: RestorePlan.shown(why))
                    case .object(let o): listing.objects.append(o)
                    case .skipped(let key, let why): listing.skipped.append((key, why))
                    case .fail(let why): failure = why
                    case .end: ended = true
                    }
                }
            }
        }
        if let failure { throw .plan(RestorePlan.shown(failure)) }
        guard answer.complete, ended else { throw .plan("the bucket's listing arrived cut short; run the command again") }
        return listing
    }

    // MARK: what the manifests this NAS can open say (privacy.md "No side doors")

    /// Each item given the SHA-256 a sealed manifest of the account records for its MD5,
    /// and bounded by the size it records: an object of another size than that is not
    /// read at all (counted `refused`, named in the problems). Counts how many are left
    /// to their MD5 alone.
    private func checked(_ items: [RestoreItem], into summary: inout ExportSummary) throws(RestoreRun.Stop) -> [RestoreItem] {
        let devices: DeviceList
        do {
            var streaming = client
            streaming.timeout = 120
            devices = try streaming.call(.devices, as: DeviceList.self)
        } catch {
            throw .control(error)
        }
        let digests = try ExportDigests.read(client: client, devices: devices, wanted: Set(items.map(\.version.md5)))
        var out: [RestoreItem] = []
        var (bySHA, byMD5) = (0, 0)
        for var item in items {
            let known = digests.known[item.version.md5]
            if let size = known?.size, size != item.version.size {
                summary.refused += 1
                summary.problems.append(.init(kind: "refused", path: item.displayPath, message: "\(item.displayPath): its object photos/…/\(item.version.md5.hex).dat "
                    + "holds \(item.version.size) bytes in the bucket, but a manifest of this account records \(size) for this MD5: it was replaced in the bucket; not exported"))
                continue
            }
            item.version.sha256 = known?.sha256
            if item.version.sha256 == nil { byMD5 += 1 } else { bySHA += 1 }
            out.append(item)
        }
        summary.checkedBySHA256 = bySHA
        summary.checkedByMD5Alone = byMD5
        summary.manifestsUnread = digests.unread.isEmpty ? nil : digests.unread
        return out
    }

    // MARK: archive classes: asked after (and, for a real run, asked back) before any is read

    private func objectStatuses(_ planned: [ExportName.Planned], thaw: Bool) throws(RestoreRun.Stop) -> [String: ObjectStatus] {
        var out: [String: ObjectStatus] = [:]
        var archived: [String] = []
        for p in planned {
            let md5 = p.item.version.md5.hex
            if ArchiveClass.needsThaw(p.storageClass) {
                archived.append(md5)
            } else {
                out[md5] = ObjectStatus(md5: md5, state: .ready, size: p.item.version.size, storageClass: p.storageClass)
            }
        }
        for (md5, status) in try transfer.objectStatuses(Set(archived), thaw: thaw) { out[md5] = status }
        return out
    }

    // MARK: dry run

    private func dryRun(_ planned: [ExportName.Planned], statuses: [String: ObjectStatus], into summary: inout ExportSummary) {
        for p in planned {
            let item = p.item
            var action = "restore"
            if let there = TransferWorkers.lookedAt(item, overwrite: false, into: &summary) {
                action = there
            } else {
                // An archived object is asked back at the real run; a dry run only counts it.
                switch statuses[item.version.md5.hex]?.state {
                case .archived?, .restoring?:
                    action = "waitArchived"
                    summary.waitingArchived += 1
                case .missing?, nil:
                    action = "missing"
                    summary.failed += 1
                    summary.problems.append(.init(kind: "missing", path: item.displayPath,
                                                  message: "\(item.displayPath): its object (\(item.version.md5.hex)) left the bucket"))
                case .ready?, .unknown?:
                    break
                }
            }
            summary.items?.append(.init(path: item.displayPath, size: item.version.size, md5: item.version.md5.hex, action: action,
                                        storageClass: p.storageClass, dated: p.dated.rawValue))
            transfer.say(action, item)
        }
    }

    // MARK: telling people and the daemon

    private func openSession() throws(RestoreRun.Stop) {
        let session = try transfer.openSession(RestoreReport(device: Self.label), denied: "permission denied: exporting writes files, which needs root or the daemon's user (try sudo photolalactl restore --by-date ...); members of the group may only use --dry-run")
        sessionId.withLock { $0 = session }
    }

    /// The export's start and end, for the daemon's audit trail (best effort: the export
    /// goes on if the daemon cannot take it).
    private func tell(_ report: ExportReport) {
        _ = try? client.send(.restoreExportReport, body: (try? ControlJSON.encode(report)) ?? [])
    }

    private func report(finished: Bool) {
        transfer.tell(session: sessionId.withLock { $0 }, device: Self.label, finished: finished)
    }

    private func say(_ line: String) { transfer.say(line) }
}
