#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import PhotolalaCore
import Queue
import Testing
import Audit

/// The trail's forward seal on a real directory: the verification key made once and
/// forgotten once shown, one epoch a batch with the key moved on and overwritten, and the
/// command's check of what the daemon sends.
@Suite struct AuditTrailSealTests {
    let dir: String
    let database: QueueDatabase

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("seal-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        database = try QueueDatabase.open(path: dir + "/queue.db")
    }

    func trail(logs: LogCapture? = nil) -> AuditTrail {
        AuditTrail(directory: dir, database: database, logger: Logger(label: "seal-test") { _ in logs ?? LogCapture() })
    }

    func bytes(_ name: String) -> [UInt8]? {
        FileManager.default.contents(atPath: "\(dir)/\(name)").map { Array($0) }
    }

    func mode(_ name: String) -> mode_t {
        var st = stat()
        return stat("\(dir)/\(name)", &st) == 0 ? st.st_mode & 0o777 : 0
    }

    /// The command's check, as `audit --verify --verification-key -` runs it.
    func check(_ t: AuditTrail, key: VerificationKey) async throws -> AuditVerification {
        let material = await t.sealedMaterial()
        defer { material.close() }
        var reader = AuditMaterialReader(key: key)
        try reader.feed(material.header)
        for part in material.parts {
            var chunk = [UInt8](repeating: 0, count: Int(part.size))
            #expect(pread(part.fd, &chunk, chunk.count, 0) == chunk.count)
            // Fed in small pieces: lines cross the reads.
            for piece in stride(from: 0, to: chunk.count, by: 7) { try reader.feed(Array(chunk[piece..<min(piece + 7, chunk.count)])) }
        }
        return try reader.finish()
    }

    @Test func theVerificationKeyIsMadeOnceShownOnceAndThenKeptNowhere() async throws {
        let t = trail()
        await t.flush()
        #expect(mode(AuditSealStore.pendingFile) == 0o600 && mode(AuditSealStore.keyFile) == 0o600 && mode(AuditSealStore.sealsFile) == 0o600)
        let shown = try #require(await t.verificationKey())
        let key = try #require(shown.key)
        #expect(shown.fingerprint == key.fingerprint && shown.shownAt == nil)
        // Epoch 0 is sealed at once (where the trail stands) and its key is not the file's.
        let state = try #require(try AuditSealStore(directory: dir).loadState())
        #expect(state.key == key.first.next())
        #expect(!String(decoding: bytes(AuditSealStore.keyFile) ?? [], as: UTF8.self).contains(hex(key.bytes)))

        let kept = "\(dir)/kept-by-a-link"
        #expect(link("\(dir)/\(AuditSealStore.pendingFile)", kept) == 0)
        #expect(await t.verificationKeyTaken(fingerprint: "not it", by: .caller(uid: 0)) == false)
        #expect(await t.verificationKeyTaken(fingerprint: key.fingerprint, by: .caller(uid: 0)))
        #expect(bytes(AuditSealStore.pendingFile) == nil)
        let left = try #require(FileManager.default.contents(atPath: kept))
        #expect(!left.isEmpty && left.allSatisfy { $0 == 0 }, "overwritten before it was unlinked")
        let again = try #require(await t.verificationKey())
        #expect(again.key == nil && again.shownAt != nil && again.fingerprint == key.fingerprint)
        // Its showing is a record of its own.
        await t.flush()
        #expect(await t.records(since: nil, limit: 10).records.map(\.event) == [.auditVerificationKeyShown])
        // A new trail object (a restart) does not make another.
        #expect(try #require(await trail().verificationKey()).fingerprint == key.fingerprint)
    }

    @Test func eachBatchIsAnEpochAndTheKeyFileHoldsOnlyTheNext() async throws {
        let t = trail()
        let key = try #require(await t.verificationKey()?.key)
        for batch in 1...3 {
            for _ in 0..<batch { t.record(AuditEvent(.pause, by: .daemon, .ok)) }
            await t.flush()
        }
        let entries = try AuditSealStore(directory: dir).entries()
        #expect(entries.compactMap(\.seal).map(\.epoch) == [0, 1, 2, 3])
        #expect(entries.compactMap(\.seal).map(\.seq) == [0, 1, 3, 6])
        let state = try #require(try AuditSealStore(directory: dir).loadState())
        #expect(state.key == key.first.advanced(by: 4) && state.sealed == 6)
        let file = String(decoding: bytes(AuditSealStore.keyFile) ?? [], as: UTF8.self)
        for epoch: UInt64 in 0...3 { #expect(!file.contains(hex(key.first.advanced(by: epoch).bytes))) }
        let v = try await check(t, key: key)
        #expect(v.whole && v.sealing?.checkedWithKey == true && v.sealing?.lastEpoch == 3, "\(String(describing: v.problem))")
        #expect(await t.verify().whole)
    }

    @Test func aStopBetweenASealAndTheKeysStepIsFinishedAtStart() async throws {
        let first = trail()
        let key = try #require(await first.verificationKey()?.key)
        first.record(AuditEvent(.pause, by: .daemon, .ok))
        await first.flush()
        let before = try #require(bytes(AuditSealStore.keyFile))
        first.record(AuditEvent(.resume, by: .daemon, .ok))
        await first.flush()
        // The key file as it was before its step (the seal of that epoch is on disk).
        try Data(before).write(to: URL(fileURLWithPath: "\(dir)/\(AuditSealStore.keyFile)"))
        let second = trail()
        second.record(AuditEvent(.rescan, by: .daemon, .ok))
        await second.flush()
        let v = try await check(second, key: key)
        #expect(v.whole && v.sealing?.lastEpoch == 3, "\(String(describing: v.problem))")
    }

    @Test func recordsWrittenButNotSealedBeforeAStopAreSealedAtStart() async throws {
        let first = trail()
        let key = try #require(await first.verificationKey()?.key)
        first.record(AuditEvent(.pause, by: .daemon, .ok))
        await first.flush()
        // A stop after the record reached the disk and before its seal did.
        let seals = try #require(bytes(AuditSealStore.sealsFile))
        first.record(AuditEvent(.resume, by: .daemon, .ok))
        await first.flush()
        try Data(seals).write(to: URL(fileURLWithPath: "\(dir)/\(AuditSealStore.sealsFile)"))
        let state = try #require(try AuditSealStore(directory: dir).loadState())
        try AuditSealStore(directory: dir).saveState(.init(key: state.key.epoch == 3 ? key.first.advanced(by: 2) : state.key, sealed: 1,
                                                           createdAt: state.createdAt, shownAt: nil, fingerprint: state.fingerprint))
        let logs = LogCapture()
        let second = trail(logs: logs)
        await second.flush()
        #expect(try await check(second, key: key).whole)
        #expect(logs.lines.contains { $0.contains("sealed audit records 2–2") }, "\(logs.lines)")
    }

    @Test func aKeyFileGoneMeansANewKeyAndABreakThatShows() async throws {
        let first = trail()
        let old = try #require(await first.verificationKey()?.key)
        first.record(AuditEvent(.pause, by: .daemon, .ok))
        await first.flush()
        _ = await first.verificationKeyTaken(fingerprint: old.fingerprint, by: .daemon)
        unlink("\(dir)/\(AuditSealStore.keyFile)")
        let logs = LogCapture()
        let second = trail(logs: logs)
        second.record(AuditEvent(.resume, by: .daemon, .ok))
        await second.flush()
        let fresh = try #require(await second.verificationKey()?.key)
        #expect(fresh != old)
        #expect(logs.lines.contains { $0.contains("sealing key (audit-seal.key) is gone") })
        #expect(await second.verify().problem?.kind == .sealMissing)
        #expect(try await check(second, key: old).problem?.kind == .wrongKey)
    }

    @Test func idleNothingIsSealed() async throws {
        let t = trail()
        t.record(AuditEvent(.pause, by: .daemon, .ok))
        await t.flush()
        let seals = bytes(AuditSealStore.sealsFile)
        let key = bytes(AuditSealStore.keyFile)
        await t.flush()
        _ = await t.verify()
        let material = await t.sealedMaterial()
        material.close()
        #expect(bytes(AuditSealStore.sealsFile) == seals && bytes(AuditSealStore.keyFile) == key)
    }
}

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
