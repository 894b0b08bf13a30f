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
import RestoreCtl
import RestoreWire
import Testing
import Vault
import RestoreRelay

/// The restore's daemon side run in-process against the in-memory bucket behind a real
/// `BucketSession` (waits skipped), answered directly and through a real control socket to
/// the command's side, which writes the files.
@Suite struct RestoreServiceTests {
    let clock = TestClock(skipsWaits: true)
    let bucket: InMemoryBucket
    let grants = FixedGrants(userId: "U", deviceId: "dev-1")
    let accountKeys = FixedKeys()
    let heads = Heads()
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
                                 keys: accountKeys, heads: heads, options: options, clock: clock, logger: logger, audit: audit)
        let files = [("2024/a.jpg", small), ("big.mov", big)]
        let entries = files.map { name, bytes in
            ManifestEntry(kind: .appeared, folder: "/srv/photos", path: Array(name.utf8), time: 1_800_000_000_000,
                          version: FileVersion(size: Int64(bytes.count), md5: MD5Value(bytes: MD5.digest(bytes))!,
                                               mtimeSec: 1_700_000_000, mtimeNsec: 123_456_789, sha256: SHA256Value(bytes: SHA256.digest(bytes))))
        }
        for (_, bytes) in files { bucket.store("photos/U/\(Hex.string(MD5.digest(bytes))).dat", bytes: bytes) }
        publish(device: "dev-1", name: "nas", entries: entries, lastBackupAt: "2026-11-22T07:00:00Z")
        publish(device: "0ld-device", name: "old-nas", entries: Array(entries.prefix(1)), lastBackupAt: "2025-01-01T00:00:00Z")
    }

    /// A device's manifest (one log segment) and record, as its NAS wrote them: sealed
    /// with `key` (format 2), or in plaintext (format 1) when `key` is nil.
    func publish(device: String, name: String, entries: [ManifestEntry], lastBackupAt: String, key: MetadataKey?? = .none) {
        let key = key ?? accountKeys.accountKey?.metadataKey
        let keys = ManifestKeys(userId: "U", deviceId: device)
        let header = ManifestHeader(kind: .log, device: device, seq: 1, createdAt: lastBackupAt, prev: ManifestHeader.noPrevious)
        var record = DeviceRecord(deviceId: device, name: name, folders: ["/srv/photos"], lastBackupAt: lastBackupAt,
                                  files: Int64(entries.count), bytes: entries.reduce(0) { $0 + ($1.version?.size ?? 0) },
                                  logSeq: 1, snapshotSeq: 0, updatedAt: lastBackupAt, software: "photolalad test")
        guard let key else {
            bucket.store(keys.plaintext.log(1), bytes: ManifestSegment(header: header, entries: entries).encoded())
            bucket.store(keys.record, bytes: record.encoded(), contentType: "application/json")
            return
        }
        let sealed = ManifestSegment(header: header, entries: entries).sealed(key: key, objectKey: keys.log(1))
        bucket.store(keys.log(1), bytes: sealed)
        record.format = 2
        record.counter = 1
        record.head = ManifestHead(seq: 1, sha256: ManifestSegment.sealedDigestHex(of: sealed))
        bucket.store(keys.record, bytes: record.sealed(key: key, objectKey: keys.record))
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
        let result: Result<RestoreSummary, RestoreRun.Stop>
        do throws(RestoreRun.Stop) {
            result = .success(try await RestoreRun(client: ControlClient(socketPath: socket), request: request, interrupted: { false }).run())
        } catch {
            result = .failure(error)
        }
        await server.stop()
        let summary = try result.get()
        #expect(summary.restored == 2 && summary.files == 2 && summary.problems.isEmpty && summary.exitCode == 0)
        #expect(FileManager.default.contents(atPath: dir + "/out/photos/2024/a.jpg").map(Array.init) == small)
        #expect(FileManager.default.contents(atPath: dir + "/out/photos/big.mov").map(Array.init) == big)
        var st = stat()
        #expect(stat(dir + "/out/photos/big.mov", &st) == 0 && st.st_mtim.tv_sec == 1_700_000_000 && st.st_mtim.tv_nsec == 123_456_789)
        #expect(await grants.rejections == 1)
        // The daemon opened the sealed manifest, checked its chain and remembers its head.
        #expect(await heads.remembered(userId: "U", device: "dev-1") == RememberedHead(
            counter: 1, head: ManifestHead(seq: 1, sha256: ManifestSegment.sealedDigestHex(of: bucket.object(ManifestKeys(userId: "U", deviceId: "dev-1").log(1))!.bytes))))
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

    // MARK: sizes before bytes (privacy.md "No side doors")

    /// A restore of this NAS's manifest into `dir/out` through a real control socket, the
    /// command awaited as photolalactl runs it; `handler` answers the socket.
    func restoreThroughTheSocket(_ dir: String, handler: any ControlHandler) async throws -> RestoreSummary {
        let socket = dir + "/s.sock"
        let server = try await ControlServer.start(path: socket, group: "photolala",
                                                   policy: AccessPolicy(daemonUID: getuid(), readerGroup: nil, readerGroupName: "photolala"),
                                                   handler: handler, logger: Logger(label: "restore-tests"))
        let request = RestoreRun.Request(device: nil, asOf: nil, asOfText: nil, to: dir + "/out", paths: [], overwrite: false,
                                         dryRun: false, json: true, workers: 2)
        let result: Result<RestoreSummary, RestoreRun.Stop>
        do throws(RestoreRun.Stop) {
            result = .success(try await RestoreRun(client: ControlClient(socketPath: socket), request: request, interrupted: { false }).run())
        } catch {
            result = .failure(error)
        }
        await server.stop()
        return try result.get()
    }

    /// Every file below `dir` (temporary ones included) and their bytes together.
    func filesBelow(_ dir: String) -> (names: [String], bytes: Int64) {
        var names: [String] = []
        var bytes: Int64 = 0
        let e = FileManager.default.enumerator(atPath: dir)
        while let name = e?.nextObject() as? String {
            var st = stat()
            guard lstat(dir + "/" + name, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            names.append(name)
            bytes += Int64(st.st_size)
        }
        return (names.sorted(), bytes)
    }

    @Test func anObjectOfAnotherSizeIsRefusedByTheDaemonBeforeAByteIsRelayed() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("restore-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The small photo's object swapped for 3 MB, and the big one's for a bigger one:
        // one relayed whole, one in ranges; neither must reach the command.
        let swapped = [UInt8](repeating: 0x41, count: 3 << 20)
        bucket.store("photos/U/\(md5(small)).dat", bytes: swapped)
        bucket.store("photos/U/\(md5(big)).dat", bytes: big + swapped)
        let summary = try await restoreThroughTheSocket(dir, handler: Routes(restore: restore))
        #expect(summary.restored == 0 && summary.failed == 2 && summary.exitCode != 0)
        let problems = Dictionary(uniqueKeysWithValues: summary.problems.map { ($0.path, $0.message) })
        #expect(problems[dir + "/out/photos/2024/a.jpg"]?.contains("holds \(3 << 20) bytes in the bucket, not the \(small.count) expected") == true,
                "\(summary.problems)")
        #expect(problems[dir + "/out/photos/big.mov"]?.contains("holds \(big.count + (3 << 20)) bytes in the bucket, not the \(big.count) expected") == true,
                "\(summary.problems)")
        let written = filesBelow(dir + "/out")
        #expect(written.bytes == 0, "\(written.names)")
        // One record each in the trail, with who asked.
        let refused = audit.all.filter { $0.kind == .restore && $0.outcome == .refused }
        #expect(refused.count == 2)
        #expect(refused.contains(AuditEvent(.restore, by: .caller(uid: getuid()), .refused,
                                            ["step": "object", "md5": .string(md5(small)), "size": .int(3 << 20), "expected": .int(Int64(small.count)), "why": "size"])))
    }

    @Test func theCommandNeverWritesPastTheManifestsSizeWhateverTheDaemonSends() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("restore-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let swapped = [UInt8](repeating: 0x41, count: 3 << 20)
        bucket.store("photos/U/\(md5(small)).dat", bytes: swapped)
        // A daemon that does not check (another release): it is not told the size.
        let summary = try await restoreThroughTheSocket(dir, handler: Unchecking(restore: restore))
        #expect(summary.restored == 1 && summary.failed == 1 && summary.exitCode != 0)
        let message = summary.problems.first { $0.path == dir + "/out/photos/2024/a.jpg" }?.message ?? ""
        #expect(message.contains("holds more than the \(small.count) bytes expected"), "\(summary.problems)")
        // Nothing of it stays: the temporary file held at most the manifest's size and is gone.
        #expect(filesBelow(dir + "/out").names == ["photos/big.mov"])
    }

    // MARK: format 2: the daemon opens, the command checks

    @Test func withoutTheKeyDevicesShowIdsAndTimesAndTheManifestIsRefusedWithTheHint() async throws {
        accountKeys.set(.needed)
        let list = try ControlJSON.decode(DeviceList.self, from: await restore.devices().body)
        #expect(list.devices.map(\.id) == ["dev-1", "0ld-device"])
        #expect(list.devices.allSatisfy { $0.access == .keyNeeded && $0.name == nil && $0.folders.isEmpty && $0.files == 0 && $0.changedAt != nil })
        #expect(list.note?.contains("recovery-key --enter") == true)
        let answer = await restore.manifest(device: "0ld-device")
        #expect(answer.status == 409 && answer.stream == nil)
        let reply = try ControlJSON.decode(ControlReply.self, from: answer.body)
        #expect(reply.message.contains("sudo photolalactl recovery-key --enter"))
    }

    @Test func aDeviceSealedWithAnotherKeyIsNamedUnreadable() async throws {
        publish(device: "stranger", name: "x", entries: [], lastBackupAt: "2025-01-01T00:00:00Z", key: AccountKey.generate().metadataKey)
        let list = try ControlJSON.decode(DeviceList.self, from: await restore.devices().body)
        let stranger = try #require(list.devices.first { $0.id == "stranger" })
        #expect(stranger.access == .unreadable && stranger.name == nil && stranger.problem?.contains("not readable with this account's key") == true)
        let answer = await restore.manifest(device: "stranger")
        #expect(answer.status == 409)
        #expect(try ControlJSON.decode(ControlReply.self, from: answer.body).message.contains("not readable with this account's key"))
    }

    @Test func aPlaintextDeviceIsShownAsSuchAndReadOnlyWhenAllowed() async throws {
        publish(device: "old-plain", name: "plain-nas", entries: [], lastBackupAt: "2024-01-01T00:00:00Z", key: .some(nil))
        let list = try ControlJSON.decode(DeviceList.self, from: await restore.devices().body)
        let plain = try #require(list.devices.first { $0.id == "old-plain" })
        #expect(plain.access == .unencrypted && plain.format == 1 && plain.name == "plain-nas")
        #expect(await restore.manifest(device: "old-plain").status == 409)
        #expect(await restore.manifest(device: "old-plain", allowUnencrypted: true).status == 200)
    }

    @Test func aPlaintextRecordForASealedDeviceIsADowngradeRefusedAndRaised() async throws {
        let alarms = ManifestAlarms(audit: audit)
        let restore = RestoreService(bucket: BucketSession(grants: grants, transport: bucket, clock: clock, logger: Logger(label: "restore-tests")),
                                     keys: accountKeys, heads: heads, options: RestoreService.Options(Settings()), clock: clock,
                                     logger: Logger(label: "restore-tests"), audit: audit, alarms: alarms)
        // 0ld-device's sealed segment stays; its record becomes plaintext under another name.
        let keys = ManifestKeys(userId: "U", deviceId: "0ld-device")
        let forged = DeviceRecord(deviceId: "0ld-device", name: "attacker", folders: ["/root"], lastBackupAt: "2026-01-01T00:00:00Z",
                                  files: 1, bytes: 1, logSeq: 1, snapshotSeq: 0, updatedAt: "2026-01-01T00:00:00Z", software: "forger")
        bucket.store(keys.record, bytes: forged.encoded(), contentType: "application/json")
        let list = try ControlJSON.decode(DeviceList.self, from: await restore.devices().body)
        let row = try #require(list.devices.first { $0.id == "0ld-device" })
        #expect(row.access == .unreadable && row.name == nil && row.folders.isEmpty)
        #expect(row.problem?.contains("the manifest of device 0ld-device was downgraded in the bucket") == true)
        for allowed in [false, true] {
            let answer = await restore.manifest(device: "0ld-device", allowUnencrypted: allowed)
            #expect(answer.status == 409 && String(decoding: answer.body, as: UTF8.self).contains("downgraded"))
        }
        let raised = await alarms.current
        #expect(raised.map(\.device) == ["0ld-device"] && raised.first?.kind == .downgrade)
        #expect(audit.all.filter { $0.kind == .manifestRefused }.count == 1)
    }
}

/// The restore's calls on the control socket, as the daemon routes them.
private struct Routes: ControlHandler {
    let restore: RestoreService

    func handle(_ request: ControlRequest) async -> ControlResponse {
        await restore.answer(request)
    }
}

/// A daemon that relays an object without being told its size (one of an older release,
/// or one that does not check): the command's own bound is all that is left.
private struct Unchecking: ControlHandler {
    let restore: RestoreService

    func handle(_ request: ControlRequest) async -> ControlResponse {
        var request = request
        if request.route == .restoreObject { request.query["size"] = nil }
        return await restore.answer(request)
    }
}

/// Heads remembered in memory.
actor Heads: ManifestHeadMemory {
    private var kept: [String: RememberedHead] = [:]
    func remembered(userId: String, device: String) async -> RememberedHead? { kept[device] }
    func remember(userId: String, device: String, _ head: RememberedHead) async { kept[device] = head }
}
