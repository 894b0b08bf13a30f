#if canImport(Glibc)
import Glibc
#endif
import Control
import Foundation
import ManifestFormat
import PhotolalaCore
import RestoreFiles
import RestoreWire

/// `photolalactl restore`, the command's side: chooses the device, replays its manifest
/// up to `--as-of`, plans where every file goes, asks the daemon where the objects stand
/// (and archived ones back), then writes the files, `workers` at a time, each object
/// streamed from the daemon over its own connection (`TransferWorkers`). Files are written with the rights of
/// whoever runs the command; the daemon only ever hands over bytes.
package struct RestoreRun: Sendable {
    package struct Request: Sendable, Equatable {
        package var device: String?
        package var asOf: Int64?
        package var asOfText: String?
        package var to: String?
        package var paths: [String]
        package var overwrite: Bool
        package var dryRun: Bool
        package var json: Bool
        package var workers: Int
        /// `--numeric-owner`, `--no-owners` (privacy.md "Owners and modes").
        package var owners: OwnerRule.Owners
        /// `--allow-unencrypted`: a device whose manifest is still in the plaintext format 1
        /// may be restored from (under every rule all the same).
        package var allowUnencrypted: Bool

        package init(device: String?, asOf: Int64?, asOfText: String?, to: String?, paths: [String], overwrite: Bool, dryRun: Bool,
                    json: Bool, workers: Int = 10, owners: OwnerRule.Owners = .byName, allowUnencrypted: Bool = false) {
            self.device = device
            self.asOf = asOf
            self.asOfText = asOfText
            self.to = to
            self.paths = paths
            self.overwrite = overwrite
            self.dryRun = dryRun
            self.json = json
            self.workers = workers
            self.owners = owners
            self.allowUnencrypted = allowUnencrypted
        }
    }

    package enum Stop: Error, CustomStringConvertible {
        case control(ControlClient.Failure)
        case plan(String)
        package var description: String {
            switch self {
            case .control(let f): f.description
            case .plan(let why): why
            }
        }

        /// The answer `stream` streamed, with its failures worded for `what` ("the manifest").
        static func streamed(_ what: String, _ stream: () throws -> ControlClient.StreamAnswer) throws(Stop) -> ControlClient.StreamAnswer {
            let answer: ControlClient.StreamAnswer
            do {
                answer = try stream()
            } catch let failure as ControlClient.Failure {
                throw .control(failure)
            } catch {
                throw .plan("\(what) could not be read: \(error)")
            }
            guard (200..<300).contains(answer.status) else {
                throw .plan(answer.errorMessage ?? "\(what) could not be read (HTTP \(answer.status))")
            }
            return answer
        }
    }

    private let client: ControlClient
    private let request: Request
    private let interrupted: @Sendable () -> Bool

    package init(client: ControlClient, request: Request, interrupted: @escaping @Sendable () -> Bool) {
        self.client = client
        self.request = request
        self.interrupted = interrupted
    }

    /// Runs the restore; prints as it goes and returns the summary (its exit code is cli.md's).
    package func run() async throws(Stop) -> RestoreSummary {
        try await BlockingCalls.with(threads: max(1, request.workers) + 2) { io throws(Stop) in
            let transfer = TransferWorkers(client: client, rules: .init(noun: "restore", gone: "is not in the bucket", overwrite: request.overwrite,
                                                                        workers: request.workers),
                                           json: request.json, io: io, interrupted: interrupted)
            var session: TransferWorkers.Session?
            do throws(Stop) {
                return try await runSession(transfer, io, &session)
            } catch {
                // The daemon's session (and the audit trail) hears why it stopped.
                await transfer.tell(session, RestoreProgress(), finished: true, outcome: .init(stopped: error.description))
                throw error
            }
        }
    }

    private func runSession(_ transfer: TransferWorkers, _ io: BlockingCalls, _ session: inout TransferWorkers.Session?) async throws(Stop) -> RestoreSummary {
        let client = self.client
        let devices = try await io.call { () throws(Stop) in
            var streaming = client
            streaming.timeout = 120
            do throws(ControlClient.Failure) {
                return try streaming.call(.devices, as: DeviceList.self)
            } catch {
                throw .control(error)
            }
        }
        let device: DeviceList.Device
        switch DeviceChoice.pick(request.device, from: devices) {
        case .success(let d): device = d
        case .failure(let f): throw .plan(f.description)
        }
        let label = device.name ?? device.id
        // Said before anything is written: the daemon refuses these too, in the same words.
        if device.access == .keyNeeded {
            throw .plan("the manifest of device \(device.id) is encrypted with this account's key, which this NAS does not hold yet: enter the account's recovery key (sudo photolalactl recovery-key --enter), then run the restore again")
        }
        if device.access == .unencrypted && !request.allowUnencrypted {
            throw .plan("the manifest of device \(label) is in the old plaintext format, which nothing authenticates: restore from it only with --allow-unencrypted (every restore rule still applies)")
        }
        if !request.dryRun {
            let opening = RestoreReport(device: label, deviceId: device.id, to: request.to, asOf: request.asOfText, paths: request.paths.count)
            session = try await io.call { () throws(Stop) in
                try transfer.openSession(opening, denied: "permission denied: restoring writes files, which needs root or the daemon's user (try sudo photolalactl restore ...); members of the group may only use --dry-run")
            }
        }
        var summary = RestoreSummary(device: .init(id: device.id, name: device.name), asOf: request.asOfText, dryRun: request.dryRun,
                                     files: 0, bytes: 0, restored: 0, alreadyThere: 0, kept: 0, failed: 0, waitingArchived: 0,
                                     problems: [], items: request.dryRun ? [] : nil, interrupted: false)
        let (replay, manifestProblems) = try await io.call { () throws(Stop) in try self.readManifest(device.id, transfer) }
        summary.problems += manifestProblems.map { .init(kind: "manifest", path: nil, message: $0) }
        if device.access == .unencrypted {
            transfer.say("The manifest of \(label) is in the old plaintext format: nothing proves who wrote it (--allow-unencrypted); every restore rule applies")
        }
        let selected: [ManifestReplay.File]
        do {
            let picked = try RestorePlan.select(replay.files, filters: request.paths)
            selected = picked.files
            summary.problems += picked.unmatched.map { .init(kind: "filter", path: $0, message: "\($0): no file under it in the manifest of \(label)") }
        } catch {
            throw .plan(error.description)
        }
        // Nothing the bucket says chooses where a file goes: only --to, or this NAS's own watched folders.
        let watched = request.to == nil ? try await io.call { () throws(Stop) in try self.watchedFolders() } : []
        let plan = RestorePlan.plan(selected, deviceFolders: RestorePlan.deviceFolders(record: device.folders, files: replay.files),
                                    to: request.to, watched: watched, folderOwners: replay.folderOwners)
        // Made once the plan knows the folders' owners.
        let writer = RestoreWriter(overwrite: request.overwrite, owners: request.owners, folderOwners: plan.folderOwners)
        summary.problems += plan.refused.map { .init(kind: "refused", path: $0.subject, message: $0.reason) }
        let items = plan.items
        summary.files = items.count
        summary.bytes = items.reduce(0) { $0 + $1.version.size }
        transfer.say("\(request.dryRun ? "Would restore" : "Restoring") \(items.count) file\(items.count == 1 ? "" : "s") (\(Units.humanBytes(summary.bytes))) of \(label)"
            + (request.asOfText.map { " as of \($0)" } ?? "") + (request.to.map { " into \($0)" } ?? " to their original folders"))
        let bucket = devices.devices.reduce(Int64(0)) { $0 + $1.files }
        let wanted = Set(items.map(\.version.md5.hex))
        let statuses = try await io.call { () throws(Stop) in
            try self.objectStatuses(wanted, thaw: !self.request.dryRun, bucketEstimate: bucket, transfer)
        }
        if request.dryRun {
            let looked = summary
            summary = await io.run {
                var s = looked
                self.dryRun(items, statuses: statuses, transfer, into: &s)
                return s
            } ?? summary
        } else {
            let opened = session
            let progress = await transfer.write(items, statuses: statuses, writer: writer,
                                                tell: { await transfer.tell(opened, $0, finished: false) }, into: &summary)
            await transfer.tell(opened, progress, finished: true, outcome: .init(
                restored: summary.restored, alreadyThere: summary.alreadyThere, kept: summary.kept, failed: summary.failed,
                refused: summary.problems.filter { $0.kind == "refused" }.count, waitingArchived: summary.waitingArchived,
                interrupted: summary.interrupted))
        }
        return summary
    }

    // MARK: planning (blocking: called through `BlockingCalls`)

    /// This NAS's watched folders, as the daemon runs with them (its status), whatever
    /// config file this command was given.
    private func watchedFolders() throws(Stop) -> [String] {
        do {
            return try client.call(.status, as: DaemonStatus.self).watch.paths
        } catch {
            throw .control(error)
        }
    }

    /// The manifest, replayed up to `--as-of`; read again if compaction moved it meanwhile.
    /// Every segment is read again here from its bytes (the daemon checked and opened it;
    /// this side trusts none of it). A manifest that stops short (a gap, a missing head, a
    /// rollback) is a problem unless `--as-of` lies before where it stops.
    private func readManifest(_ device: String, _ transfer: TransferWorkers) throws(Stop) -> (ManifestReplay, [String]) {
        var streaming = client
        streaming.timeout = 120
        for attempt in 1...3 {
            var replay = ManifestReplay(asOf: request.asOf)
            var frames = ManifestFrames.Reader()
            var report: ManifestReader.Report?
            var damaged: String?
            var query = ["device": device]
            if request.allowUnencrypted { query["allowUnencrypted"] = "1" }
            let answer = try Stop.streamed("the manifest") {
                try streaming.stream(.manifest, query: query) { bytes in
                    for frame in try frames.feed(bytes) {
                        switch frame {
                        case .segment(let object):
                            do {
                                let segment = try ManifestSegment.decode(object)
                                replay.apply(segment.entries)
                            } catch {
                                damaged = "a manifest segment arrived damaged (\(error))"
                            }
                        case .plaintext(let plaintext):
                            do {
                                let segment = try ManifestSegment.decode(plaintext: plaintext)
                                replay.apply(segment.entries)
                            } catch {
                                damaged = "a manifest segment arrived damaged (\(error))"
                            }
                        case .report(let r): report = r
                        }
                    }
                }
            }
            if let damaged { throw .plan(damaged) }
            guard let report, answer.complete else { throw .plan("the manifest arrived cut short; run the command again") }
            if report.retry && attempt < 3 { continue }
            if report.segments == 0 { throw .plan(report.problems.first ?? "the device has no manifest") }
            if let whole = report.wholeBefore, let asOf = request.asOf, asOf < whole {
                // What is missing came after the moment asked for: the restore is whole.
                for p in report.problems { transfer.say("Note: \(RestorePlan.shown(p)); --as-of lies before it, so this restore is whole") }
                return (replay, [])
            }
            return (replay, report.problems)
        }
        throw .plan("the manifest kept changing while it was read; run the command again")
    }

    // MARK: where the objects stand before any is read: from the bucket's listing when the
    // restore wants a good part of the bucket (a request per 1,000 objects), otherwise with
    // a HEAD per object; objects in an archive class are then asked after (and, for a real
    // run, asked back) one by one.

    /// `bucketEstimate`: the files the account's devices hold, an upper bound of the objects.
    private func objectStatuses(_ md5s: Set<String>, thaw: Bool, bucketEstimate: Int64, _ transfer: TransferWorkers) throws(Stop) -> [String: ObjectStatus] {
        guard !md5s.isEmpty else { return [:] }
        guard ObjectListing.worthListing(wanted: md5s.count, bucketEstimate: bucketEstimate) else {
            return try transfer.objectStatuses(md5s, thaw: thaw)
        }
        var listing = ObjectListing(wanted: md5s)
        var streaming = client
        streaming.timeout = 300
        let answer = try Stop.streamed("the bucket's listing") { try streaming.stream(.restoreListing) { try listing.feed($0) } }
        guard answer.complete, listing.ended else { throw .plan("the bucket's listing arrived cut short; run the command again") }
        var out = listing.statuses
        let archived = Set(out.values.filter { $0.state == .archived }.map(\.md5))
        if !archived.isEmpty {
            for (md5, status) in try transfer.objectStatuses(archived, thaw: thaw) { out[md5] = status }
        }
        return out
    }

    // MARK: dry run

    private func dryRun(_ items: [RestoreItem], statuses: [String: ObjectStatus], _ transfer: TransferWorkers, into summary: inout RestoreSummary) {
        for item in items {
            let status = statuses[item.version.md5.hex]
            var action: String
            switch status?.state {
            case .missing?, nil:
                action = "missing"
                summary.failed += 1
                summary.problems.append(.init(kind: "missing", path: item.displayPath, message: "\(item.displayPath): its object is not in the bucket"))
            case .archived?, .restoring?:
                action = "waitArchived"
                summary.waitingArchived += 1
            default:
                action = "restore"
            }
            if action != "missing", let there = TransferWorkers.lookedAt(item, overwrite: request.overwrite, into: &summary) {
                action = there
            }
            summary.items?.append(.init(path: item.displayPath, size: item.version.size, md5: item.version.md5.hex, action: action,
                                        storageClass: status?.storageClass))
            transfer.say(action, item)
        }
        // An archived object is asked back at the real run; a dry run only counts it.
        summary.restored = 0
    }
}
