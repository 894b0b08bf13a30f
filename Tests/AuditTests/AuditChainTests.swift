import Foundation
import PhotolalaCore
import Testing
import Audit

/// The chain on plain lines: every way a trail can be tampered with is named, at its place.
@Suite struct AuditChainTests {
    /// `count` chained records starting after `start`, and the seal of the last.
    static func trail(_ count: Int, after start: AuditMark = .origin) -> (lines: [String], seal: AuditMark) {
        var lines: [String] = []
        var mark = start
        for i in 0..<count {
            let record = AuditRecord(seq: mark.seq + 1, at: "2026-11-22T07:00:\(String(format: "%02d", i % 60)).000Z",
                                     event: i % 2 == 0 ? .pause : .resume, actor: .caller(uid: 0, user: "root"), outcome: .ok,
                                     details: ["n": .int(Int64(i))], prev: mark.hash)
            let line = AuditLine.render(record)
            lines.append(line)
            mark = AuditMark(seq: record.seq, hash: AuditLine.hash(line))
        }
        return (lines, mark)
    }

    func verify(_ lines: [String], start: AuditMark = .origin, seal: AuditMark?) -> AuditVerification {
        AuditChain.verify(files: [("audit.log", lines.map { $0 + "\n" }.joined())], start: start, seal: seal)
    }

    @Test func aWholeTrailVerifies() throws {
        let (lines, seal) = Self.trail(10)
        let v = verify(lines, seal: seal)
        #expect(v.whole, "\(String(describing: v.problem))")
        #expect(v.records == 10 && v.firstSeq == 1 && v.lastSeq == 10)
        let first = try JSONDecoder().decode(AuditRecord.self, from: Data(lines[0].utf8))
        #expect(first.prev == String(repeating: "0", count: 64))
    }

    @Test func theLineHasCliMdsKeysInOrder() {
        let line = Self.trail(1).lines[0]
        let keys = ["seq", "at", "event", "actor", "outcome", "details", "prev"].map { line.range(of: "\"\($0)\":")!.lowerBound }
        #expect(keys == keys.sorted())
        #expect(line.contains("\"actor\":{\"uid\":0,\"user\":\"root\"}"))
    }

    @Test func anEmptyTrailIsWholeUnlessTheDatabaseSaysOtherwise() {
        #expect(verify([], seal: nil).whole)
        #expect(verify([], seal: .origin).whole)
        let gone = verify([], seal: AuditMark(seq: 4, hash: String(repeating: "a", count: 64)))
        #expect(gone.problem?.kind == .cut)
    }

    @Test(arguments: [0, 4, 9])
    func oneEditedByteNamesThatRecord(index: Int) {
        var (lines, seal) = Self.trail(10)
        lines[index] = lines[index].replacingOccurrences(of: "\"n\":\(index)", with: "\"n\":7\(index)")
        let v = verify(lines, seal: seal)
        #expect(v.problem?.kind == .edited)
        #expect(v.problem?.seq == Int64(index + 1))
        #expect(v.problem?.line == index + 1)
        #expect(v.problem?.message.contains("record \(index + 1) (audit.log, line \(index + 1))") == true)
    }

    @Test func anEditedTimeIsCaughtToo() {
        var (lines, seal) = Self.trail(5)
        lines[2] = lines[2].replacingOccurrences(of: "07:00:02", with: "07:00:09")
        #expect(verify(lines, seal: seal).problem?.seq == 3)
    }

    @Test func anEditedNumberIsNamed() {
        var (lines, seal) = Self.trail(6)
        lines[2] = lines[2].replacingOccurrences(of: "{\"seq\":3,", with: "{\"seq\":13,")
        let v = verify(lines, seal: seal)
        #expect(v.problem?.kind == .edited && v.problem?.line == 3)
    }

    @Test(arguments: [1, 5, 8])
    func aDeletedRecordIsNamed(index: Int) {
        var (lines, seal) = Self.trail(10)
        lines.remove(at: index)
        let v = verify(lines, seal: seal)
        #expect(v.problem?.kind == .removed)
        #expect(v.problem?.seq == Int64(index + 2))
        #expect(v.problem?.message.contains("record \(index + 1) is missing before record \(index + 2)") == true)
    }

    @Test func aDeletedFirstRecordIsACutStart() {
        var (lines, seal) = Self.trail(5)
        lines.removeFirst()
        let v = verify(lines, seal: seal)
        #expect(v.problem?.kind == .truncatedStart && v.problem?.line == 1)
    }

    @Test(arguments: [0, 3, 8])
    func twoSwappedRecordsAreNamed(index: Int) {
        var (lines, seal) = Self.trail(10)
        lines.swapAt(index, index + 1)
        let v = verify(lines, seal: seal)
        #expect(v.problem?.kind == .reordered)
        #expect(v.problem?.line == index + 1)
        #expect(v.problem?.message.contains("records \(index + 1) and \(index + 2) are out of order") == true)
    }

    @Test func anInsertedCopyIsNamed() {
        var (lines, seal) = Self.trail(10)
        lines.insert(lines[2], at: 6)
        let v = verify(lines, seal: seal)
        #expect(v.problem?.kind == .inserted && v.problem?.line == 7)
    }

    @Test func anInsertedForgeryThatFitsTheRecordBeforeIsNamed() {
        var (lines, seal) = Self.trail(6)
        // Seq 4 and the hash of record 3: it fits what is before it, not what is after.
        var forged = try! JSONDecoder().decode(AuditRecord.self, from: Data(lines[3].utf8))
        forged.details = ["n": 99]
        lines.insert(AuditLine.render(forged), at: 3)
        let v = verify(lines, seal: seal)
        #expect(v.problem?.kind == .inserted && v.problem?.line == 4)
    }

    @Test func anInsertedGarbageLineIsNamed() {
        var (lines, seal) = Self.trail(5)
        lines.insert("hello", at: 2)
        let v = verify(lines, seal: seal)
        #expect(v.problem?.kind == .inserted && v.problem?.line == 3)
    }

    @Test func aCutTailIsCaughtByTheSeal() {
        var (lines, seal) = Self.trail(10)
        lines.removeLast(2)
        let v = verify(lines, seal: seal)
        #expect(v.problem?.kind == .cut)
        #expect(v.problem?.message.contains("records 9–10 are missing after record 8") == true)
        // Without the seal (a lost database) the same lines look whole: why it is kept.
        #expect(verify(lines, seal: nil).whole)
    }

    @Test func aLineAddedAfterTheSealIsNamed() {
        let (lines, seal) = Self.trail(5)
        let more = Self.trail(6).lines
        let v = verify(lines + [more[5]], seal: seal)
        #expect(v.problem?.kind == .added && v.problem?.line == 6)
    }

    @Test func aTornLastLineIsDamaged() {
        let (lines, seal) = Self.trail(4)
        let text = lines.map { $0 + "\n" }.joined() + "{\"seq\":5,\"at\":\"2026"
        let v = AuditChain.verify(files: [("audit.log", text)], start: .origin, seal: seal)
        #expect(v.problem?.kind == .damaged && v.problem?.line == 5)
    }

    @Test func theChainGoesOnAcrossRotatedFiles() {
        let (lines, seal) = Self.trail(30)
        let files = [("audit.log.2", lines[0..<10]), ("audit.log.1", lines[10..<20]), ("audit.log", lines[20...])]
            .map { (name: $0.0, text: $0.1.map { $0 + "\n" }.joined()) }
        let v = AuditChain.verify(files: files, start: .origin, seal: seal)
        #expect(v.whole)
        #expect(v.files == ["audit.log.2", "audit.log.1", "audit.log"])
        // A whole middle file gone: records 11–20 are missing, before the first of audit.log.
        let gap = AuditChain.verify(files: [files[0], files[2]], start: .origin, seal: seal)
        #expect(gap.problem?.kind == .removed && gap.problem?.file == "audit.log" && gap.problem?.line == 1)
        #expect(gap.problem?.message.contains("records 11–20 are missing") == true)
    }

    @Test func theHeadChecksTheStartOnceTheOldestFileWasDropped() {
        let (all, seal) = Self.trail(30)
        // audit.log.2 (records 1–10) rotated away: the head is record 10.
        let head = AuditMark(seq: 10, hash: AuditLine.hash(all[9]))
        let kept = [("audit.log.2", all[10..<20]), ("audit.log.1", all[20...])].map { (name: $0.0, text: $0.1.map { $0 + "\n" }.joined()) }
        #expect(AuditChain.verify(files: kept, start: head, seal: seal).whole)
        // Its first line deleted by hand: caught, though no record before it is left.
        var cut = kept
        cut[0].text = all[11..<20].map { $0 + "\n" }.joined()
        let v = AuditChain.verify(files: cut, start: head, seal: seal)
        #expect(v.problem?.kind == .truncatedStart && v.problem?.message.contains("record 11 is missing at the start") == true)
    }

    @Test func theChainAfterABreakKeepsShowingIt() {
        // The trail went on after record 10 as sealed, though records 9–10 were cut.
        let (lines, seal) = Self.trail(10)
        let after = Self.trail(3, after: seal).lines
        let v = verify(Array(lines[0..<8]) + after, seal: AuditMark(seq: 13, hash: AuditLine.hash(after[2])))
        #expect(v.problem?.kind == .removed && v.problem?.seq == 11)
    }

    @Test func marksRoundTripThroughTheSettingTable() {
        let mark = AuditMark(seq: 42, hash: String(repeating: "ab", count: 32))
        #expect(AuditMark(mark.description) == mark)
        #expect(AuditMark("42 short") == nil)
        #expect(AuditMark("") == nil)
    }
}
