#if canImport(Glibc)
import Glibc
#endif
import Control
import Foundation
import Manifest
import PhotolalaCore
import Synchronization

/// `photolalactl restore`, the command's side: chooses the device, replays its manifest
/// up to `--as-of`, plans where every file goes, asks the daemon where the objects stand
/// (and archived ones back), then writes the files on `workers` threads, each object
/// streamed from the daemon over its own connection. Files are written with the rights of
/// whoever runs the command; the daemon only ever hands over bytes.
package final class RestoreRun: Sendable {
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

        package init(device: String?, asOf: Int64?, asOfText: String?, to: String?, paths: [String], overwrite: Bool, dryRun: Bool,
                    json: Bool, workers: Int = 10, owners: OwnerRule.Owners = .byName) {
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
    }

    let client: ControlClient
    let request: Request
    /// Made again once the plan knows the folders' owners.
    var writer: RestoreWriter { state.withLock { $0.writer } }
    let interrupted: @Sendable () -> Bool
    let state: Mutex<State>
    let tty: Bool

    struct State {
        var writer: RestoreWriter
        var progress = RestoreProgress()
        var queue: [RestoreItem] = []
        var next = 0
        var problems: [RestoreSummary.Problem] = []
        var sessionId: String?
        /// The device's name (or id), as the session shows it.
        var device = ""
        var finished = false
    }

    package init(client: ControlClient, request: Request, interrupted: @escaping @Sendable () -> Bool) {
        self.client = client
        self.request = request
        self.state = Mutex(State(writer: RestoreWriter(overwrite: request.overwrite, owners: request.owners)))
        self.interrupted = interrupted
        self.tty = isatty(2) == 1 && !request.json
    }

    /// Runs the restore; prints as it goes and returns the summary (its exit code is cli.md's).
    package func run() throws(Stop) -> RestoreSummary {
        var streaming = client
        streaming.timeout = 120
        let devices: DeviceList
        do {
            devices = try streaming.call(.devices, as: DeviceList.self)
        } catch {
            throw .control(error)
        }
        let device: DeviceList.Device
        switch DeviceChoice.pick(request.device, from: devices) {
        case .success(let d): device = d
        case .failure(let f): throw .plan(f.description)
        }
        let label = device.name ?? device.id
        if !request.dryRun { try openSession(device: label) }
        var summary = RestoreSummary(device: .init(id: device.id, name: device.name), asOf: request.asOfText, dryRun: request.dryRun,
                                     files: 0, bytes: 0, restored: 0, alreadyThere: 0, kept: 0, failed: 0, waitingArchived: 0,
                                     problems: [], items: request.dryRun ? [] : nil, interrupted: false)
        let (replay, manifestProblems) = try readManifest(device.id)
        summary.problems += manifestProblems.map { .init(kind: "manifest", path: nil, message: $0) }
        let selected: [ManifestReplay.File]
        do {
            let picked = try RestorePlan.select(replay.files, filters: request.paths)
            selected = picked.files
            summary.problems += picked.unmatched.map { .init(kind: "filter", path: $0, message: "\($0): no file under it in the manifest of \(label)") }
        } catch {
            throw .plan(error.description)
        }
        // Nothing the bucket says chooses where a file goes: only --to, or this NAS's own watched folders.
        let watched = request.to == nil ? try watchedFolders() : []
        let plan = RestorePlan.plan(selected, deviceFolders: RestorePlan.deviceFolders(record: device.folders, files: replay.files),
                                    to: request.to, watched: watched)
        state.withLock { $0.writer = RestoreWriter(overwrite: request.overwrite, owners: request.owners, folderOwners: plan.folderOwners) }
        summary.problems += plan.refused.map { .init(kind: "refused", path: $0.subject, message: $0.reason) }
        let items = plan.items
        summary.files = items.count
        summary.bytes = items.reduce(0) { $0 + $1.version.size }
        say("\(request.dryRun ? "Would restore" : "Restoring") \(items.count) file\(items.count == 1 ? "" : "s") (\(Units.humanBytes(summary.bytes))) of \(label)"
            + (request.asOfText.map { " as of \($0)" } ?? "") + (request.to.map { " into \($0)" } ?? " to their original folders"))
        let bucket = devices.devices.reduce(Int64(0)) { $0 + $1.files }
        let statuses = try objectStatuses(Set(items.map(\.version.md5.hex)), thaw: !request.dryRun, bucketEstimate: bucket)
        if request.dryRun {
            dryRun(items, statuses: statuses, into: &summary)
        } else {
            restore(items, statuses: statuses, into: &summary)
            report(finished: true)
        }
        return summary
    }

    // MARK: planning

    private func openSession(device: String) throws(Stop) {
        do {
            let reply = try client.call(.restoreSession, body: try ControlJSON.encode(RestoreReport(device: device)), as: RestoreSessionReply.self)
            state.withLock {
                $0.sessionId = reply.id
                $0.device = device
            }
        } catch let failure as ControlClient.Failure {
            if case .permissionDenied = failure {
                throw .control(.permissionDenied(hint: "permission denied: restoring writes files, which needs root or the daemon's user (try sudo photolalactl restore ...); members of the group may only use --dry-run"))
            }
            throw .control(failure)
        } catch {
            throw .plan("\(error)")
        }
    }

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
    private func readManifest(_ device: String) throws(Stop) -> (ManifestReplay, [String]) {
        var streaming = client
        streaming.timeout = 120
        for attempt in 1...3 {
            var replay = ManifestReplay(asOf: request.asOf)
            var frames = ManifestFrames.Reader()
            var report: ManifestReader.Report?
            var damaged: String?
            let answer: ControlClient.StreamAnswer
            do {
                answer = try streaming.stream(.manifest, query: ["device": device]) { bytes in
                    for frame in try frames.feed(bytes) {
                        switch frame {
                        case .segment(let object):
                            do {
                                let segment = try ManifestSegment.decode(object)
                                replay.apply(segment.entries)
                            } catch {
                                damaged = "a manifest segment arrived damaged (\(error))"
                            }
                        case .report(let r): report = r
                        }
                    }
                }
            } catch let failure as ControlClient.Failure {
                throw .control(failure)
            } catch {
                throw .plan("the manifest could not be read: \(error)")
            }
            guard (200..<300).contains(answer.status) else {
                throw .plan(answer.errorMessage ?? "the manifest could not be read (HTTP \(answer.status))")
            }
            if let damaged { throw .plan(damaged) }
            guard let report, answer.complete else { throw .plan("the manifest arrived cut short; run the command again") }
            if report.retry && attempt < 3 { continue }
            if report.segments == 0 { throw .plan(report.problems.first ?? "the device has no manifest") }
            return (replay, report.problems)
        }
        throw .plan("the manifest kept changing while it was read; run the command again")
    }

    /// A line of the human output (stdout); nothing with `--json`.
    func say(_ line: String) {
        guard !request.json else { return }
        var bytes = Array((line + "\n").utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(1, raw.baseAddress! + offset, raw.count - offset)
                if n <= 0 { if errno == EINTR { continue }; return }
                offset += n
            }
        }
    }
}
