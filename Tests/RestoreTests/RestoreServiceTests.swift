#if canImport(Glibc)
import Glibc
#endif
import Bucket
import BucketTesting
import Control
import Digests
import Foundation
import Logging
import ManifestFormat
import PhotolalaCore
import Testing
@testable import Restore

/// The restore's daemon side run in-process against the in-memory bucket behind a real
/// `BucketSession` (waits skipped), answered directly and through a real control socket to
/// the command's side, which writes the files.
@Suite struct RestoreServiceTests {
    let clock = TestClock(skipsWaits: true)
    let bucket: InMemoryBucket
    let grants = FixedGrants(userId: "U", deviceId: "dev-1")
    let restore: RestoreService
    let audit = CollectedAudit()
    let small = Array("a photo".utf8) + [UInt8](repeating: 7, count: 1000)
    /// Above the range threshold set below: read as ten ranges, three at a time.
    let big = (0..<(300 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31) }

    init() {
        bucket = InMemoryBucket(clock: clock)
        var options = RestoreService.Options(Settings())
        options.rangeThreshold = 64 << 10
        options.rangeSize = 32 << 10
        let logger = Logger(label: "restore-tests")
        restore = RestoreService(bucket: BucketSession(grants: grants, transport: bucket, clock: clock, logger: logger),
                                 options: options, clock: clock, logger: logger, audit: audit)
        let files = [("2024/a.jpg", small), ("big.mov", big)]
        let entries = files.map { name, bytes in
            ManifestEntry(kind: .appeared, folder: "/srv/photos", path: Array(name.utf8), time: 1_800_000_000_000,
                          version: FileVersion(size: Int64(bytes.count), md5: MD5Value(bytes: MD5.digest(bytes))!,
                                               mtimeSec: 1_700_000_000, mtimeNsec: 123_456_789))
        }
        for (_, bytes) in files { bucket.store("photos/U/\(Hex.string(MD5.digest(bytes))).dat", bytes: bytes) }
        publish(device: "dev-1", name: "nas", entries: entries, lastBackupAt: "2026-11-22T07:00:00Z")
        publish(device: "0ld-device", name: "old-nas", entries: Array(entries.prefix(1)), lastBackupAt: "2025-01-01T00:00:00Z")
    }

    /// A device's manifest (one log segment) and record, as its NAS wrote them.
    func publish(device: String, name: String, entries: [ManifestEntry], lastBackupAt: String) {
        let keys = ManifestKeys(userId: "U", deviceId: device)
        let header = ManifestHeader(kind: .log, device: device, seq: 1, createdAt: lastBackupAt)
        bucket.store(keys.log(1), bytes: ManifestSegment(header: header, entries: entries).encoded())
        let record = DeviceRecord(deviceId: device, name: name, folders: ["/srv/photos"], lastBackupAt: lastBackupAt,
                                  files: Int64(entries.count), bytes: entries.reduce(0) { $0 + ($1.version?.size ?? 0) },
                                  logSeq: 1, snapshotSeq: 0, updatedAt: lastBackupAt, software: "photolalad test")
        bucket.store(keys.record, bytes: record.encoded(), contentType: "application/json")
    }

    func md5(_ bytes: [UInt8]) -> String { Hex.string(MD5.digest(bytes)) }

    @Test func devicesListsEveryDeviceWithAManifestThisNASFirst() async throws {
        let answer = await restore.devices()
        #expect(answer.status == 200)
        let list = try ControlJSON.decode(DeviceList.self, from: answer.body)
        #expect(list.devices.map(\.id) == ["dev-1", "0ld-device"])
        #expect(list.devices.map(\.current) == [true, false])
        #expect(list.devices[0].name == "nas" && list.devices[0].files == 2 && list.devices[0].bytes == Int64(small.count + big.count))
    }

    @Test func objectsAreAskedAfterAndArchivedOnesAskedBack() async throws {
        let archived = Array("cold".utf8)
        bucket.store("photos/U/\(md5(archived)).dat", bytes: archived, storageClass: "GLACIER")
        let missing = String(repeating: "0", count: 32)
        func statuses(thaw: Bool) async throws -> [ObjectStatus.State] {
            let answer = await restore.objects(ObjectQuery(md5s: [md5(small), md5(archived), missing]), thaw: thaw)
            return try ControlJSON.decode(ObjectStatusList.self, from: answer.body).objects.map(\.state)
        }
        #expect(try await statuses(thaw: false) == [.ready, .archived, .missing])
        #expect(try await statuses(thaw: true) == [.ready, .restoring, .missing])
        #expect(bucket.object("photos/U/\(md5(archived)).dat")?.restore == .inProgress)
    }

    @Test func signedOutOrPausedIsAnsweredBeforeTheBucketIsAsked() async throws {
        await grants.refuse(.paused(.quotaExceeded))
        let paused = await restore.devices()
        #expect(paused.status == 503)
        let reply = try ControlJSON.decode(ControlReply.self, from: paused.body)
        #expect(reply.message == "the bucket cannot be reached now: \(DaemonStatus.PauseReason.quotaExceeded.explanation)")
        await grants.refuse(.signedOut)
        let signedOut = await restore.manifest(device: "dev-1")
        #expect(signedOut.status == 409 && signedOut.stream == nil)
        #expect(bucket.requests("ListObjectsV2") == 0)
    }

    @Test func aRestoreThroughTheControlSocketWritesEveryFileThroughA503StormAndAnExpiredGrant() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("restore-\(UUID().uuidString.prefix(8))").path
        let socket = dir + "/s.sock"
        let server = try await ControlServer.start(path: socket, group: "photolala",
                                                   policy: AccessPolicy(daemonUID: getuid(), readerGroup: nil, readerGroupName: "photolala"),
                                                   handler: Routes(restore: restore), logger: Logger(label: "restore-tests"))
        // A request, so the grant in hand is one S3 has seen; then it expires.
        _ = await restore.devices()
        bucket.expireTokensSeenSoFar()
        bucket.failNext(3, with: .slowDown, operations: ["GetObject"])

        let request = RestoreRun.Request(device: nil, asOf: nil, asOfText: nil, to: dir + "/out", paths: [], overwrite: false,
                                         dryRun: false, json: true, workers: 2)
        // The command blocks in read(2): on a thread of its own, as photolalactl runs.
        let result: Result<RestoreSummary, RestoreRun.Stop> = await withCheckedContinuation { done in
            Thread.detachNewThread {
                do throws(RestoreRun.Stop) {
                    done.resume(returning: .success(try RestoreRun(client: ControlClient(socketPath: socket), request: request,
                                                                   interrupted: { false }).run()))
                } catch {
                    done.resume(returning: .failure(error))
                }
            }
        }
        await server.stop()
        let summary = try result.get()
        #expect(summary.restored == 2 && summary.files == 2 && summary.problems.isEmpty && summary.exitCode == 0)
        #expect(FileManager.default.contents(atPath: dir + "/out/photos/2024/a.jpg").map(Array.init) == small)
        #expect(FileManager.default.contents(atPath: dir + "/out/photos/big.mov").map(Array.init) == big)
        var st = stat()
        #expect(stat(dir + "/out/photos/big.mov", &st) == 0 && st.st_mtim.tv_sec == 1_700_000_000 && st.st_mtim.tv_nsec == 123_456_789)
        #expect(await grants.rejections == 1)
        // Ten ranges of the big file, the small one whole, the manifest, the device records,
        // and the three 503s tried again in place.
        #expect(bucket.requests("GetObject") >= 10 + 1 + 1 + 3)
        // Who restored which device where, and how it ended: the command's session told the daemon.
        let me = AuditActor.caller(uid: getuid())
        #expect(audit.all == [
            AuditEvent(.restore, by: me, .ok, ["step": "started", "device": "nas", "deviceId": "dev-1", "destination": .string(dir + "/out")]),
            AuditEvent(.restore, by: me, .ok, ["step": "finished", "device": "nas", "deviceId": "dev-1", "destination": .string(dir + "/out"),
                                               "files": 2, "restored": 2, "alreadyThere": 0, "kept": 0, "failed": 0, "refused": 0]),
        ])
        try? FileManager.default.removeItem(atPath: dir)
    }
}

/// The restore's calls on the control socket, as the daemon routes them.
private struct Routes: ControlHandler {
    let restore: RestoreService

    func handle(_ request: ControlRequest) async -> ControlResponse {
        await restore.answer(request)
    }
}
