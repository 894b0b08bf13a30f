import Foundation
import PhotolalaCore
import Testing
import Audit

/// The forward seal's pure parts: the key's one-way steps, the tag, the verification key as
/// people see it (vectors made once with Python's hmac and hashlib: docs/audit-seal.md),
/// and the check against a trail that someone rewrote with care.
@Suite struct AuditSealTests {
    static let k0 = VerificationKey(bytes: Array(0..<32))

    @Test func theKeyMovesForwardOneWayAndTheVerificationKeyComputesEveryEpoch() {
        let k1 = Self.k0.first.next()
        #expect(k1.epoch == 1 && hex(k1.bytes) == "649a55a6274a79c62d41619d9d2a7cc7d04253f20d4576fac0f9156a0d262022")
        let k2 = k1.next()
        #expect(hex(k2.bytes) == "b5dfaeb4166b6cfce059b8d417597e7da27e2df16b16a6b4b24851a61c4289fb")
        #expect(Self.k0.first.advanced(by: 2) == k2)
        #expect(k1.commitment == "67f75736fbb453f4b77000c55edd00272866360ee3d02e9a6b9774bda06f6c50")
        #expect(Self.k0.fingerprint == "eb37e35acbba7ab059358cdb142f21dd")
        #expect(!"\(k2)".contains(hex(k2.bytes)) && !"\(Self.k0)".contains(hex(Self.k0.bytes)))
    }

    @Test func aSealsTagIsHMACOfItsMessageUnderItsEpochsTagKey() {
        let seal = AuditSeal(epoch: 2, from: 3, seq: 5, hash: String(repeating: "ab", count: 32), head: .origin,
                             at: "2026-11-27T10:02:44.123Z", key: Self.k0.fingerprint)
        #expect(String(decoding: seal.message, as: UTF8.self)
            == "photolala-audit-seal-v1 epoch=2 from=3 seq=5 hash=\(seal.hash) head=0:\(AuditMark.origin.hash) at=2026-11-27T10:02:44.123Z key=eb37e35acbba7ab059358cdb142f21dd")
        let sealed = seal.sealed(with: Self.k0.first.advanced(by: 2))
        #expect(sealed.tag == "cee7645fd089058aea1c2dc8bb20747bdbe587c6aa7fd28687ccd0655818980d")
        // Its line reads back as itself.
        #expect(AuditSeal.parse(Array(sealed.line.utf8)) == sealed)
        #expect(AuditSeal.parse(Array("not a seal".utf8)) == nil)
    }

    @Test func theVerificationKeyAsPeopleSeeItAndEveryTypoRefused() throws {
        let text = Self.k0.text
        #expect(text == "000G40R4-0M30E209-185GR38E-1W8124GK-2GAHC5RR-34D1P70X-3RFM06KF-Q3TN36VD")
        #expect(try VerificationKey.parse(text) == Self.k0)
        #expect(try VerificationKey.parse(text.lowercased().replacingOccurrences(of: "-", with: " ")) == Self.k0)
        #expect(try VerificationKey.parse(text.replacingOccurrences(of: "0", with: "O")) == Self.k0)
        let chars = Array(text.replacingOccurrences(of: "-", with: ""))
        let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
        for i in chars.indices {
            for c in alphabet where c != chars[i] {
                var typo = chars
                typo[i] = c
                #expect(throws: VerificationKey.ParseError.typo) { try VerificationKey.parse(String(typo)) }
            }
        }
        #expect(throws: VerificationKey.ParseError.length(63)) { try VerificationKey.parse(String(chars.dropLast())) }
        #expect(throws: VerificationKey.ParseError.character("U", position: 1)) { try VerificationKey.parse("U" + String(chars.dropFirst())) }
    }

    // MARK: the check

    /// A trail of `count` records sealed `perEpoch` at a time from epoch 0 (over the empty
    /// trail), as the daemon writes it: its lines, its seals and its key file's state.
    struct Trail {
        var lines: [String] = []
        var seals: [AuditSeal] = []
        var state: SealingState
        var head = AuditMark.origin

        init(records count: Int, perEpoch: Int, key: VerificationKey = AuditSealTests.k0) {
            var sealing = key.first
            var position = AuditMark.origin
            var sealed: Int64 = 0
            var made: [AuditSeal] = []
            func seal() {
                made.append(AuditSeal(epoch: sealing.epoch, from: sealed, seq: position.seq, hash: position.hash, head: .origin,
                                      at: "2026-11-27T10:00:\(String(format: "%02d", made.count)).000Z", key: key.fingerprint)
                    .sealed(with: sealing))
                sealing = sealing.next()
                sealed = position.seq
            }
            seal()
            var written: [String] = []
            for i in 1...count {
                let line = AuditLine.render(AuditRecord(seq: Int64(i), at: "2026-11-27T10:00:00.000Z", event: .pause, actor: .daemon,
                                                        outcome: .ok, details: ["i": .int(Int64(i))], prev: position.hash))
                written.append(line)
                position = AuditMark(seq: Int64(i), hash: AuditLine.hash(line))
                if i % perEpoch == 0 || i == count { seal() }
            }
            lines = written
            seals = made
            state = SealingState(epoch: sealing.epoch, sealed: position.seq, fingerprint: key.fingerprint, commitment: sealing.commitment)
        }

        func check(key: VerificationKey?) -> AuditVerification {
            var chain = AuditChain(start: head)
            var check = AuditSealCheck(entries: seals.enumerated().map { .init(seal: $1, line: $0 + 1) }, state: state, head: head, key: key)
            for (i, line) in lines.enumerated() {
                let (seq, hash) = chain.add(Array(line.utf8), file: "audit.log", line: i + 1)
                check.add(seq: seq, hash: hash)
            }
            var v = chain.finish(seal: seals.last.map(\.mark))
            let (problem, sealing) = check.finish()
            if v.problem == nil { v.problem = problem }
            v.sealing = sealing
            return v
        }

        /// Record `seq` removed as an attacker would: the chain after it renumbered and
        /// recomputed, each later seal's `from`, `seq` and `hash` rewritten to match (their
        /// tags kept: nobody has their keys), the key file's `sealed` too.
        mutating func removeWithCare(_ seq: Int) {
            var records = lines.map { try! JSONDecoder().decode(AuditRecord.self, from: Data($0.utf8)) }
            records.remove(at: seq - 1)
            var prev = AuditMark.origin.hash
            var hashes: [Int64: String] = [0: prev]
            lines = records.enumerated().map { i, r in
                var r = r
                r.seq = Int64(i + 1)
                r.prev = prev
                let line = AuditLine.render(r)
                prev = AuditLine.hash(line)
                hashes[r.seq] = prev
                return line
            }
            seals = seals.map { s in
                var s = s
                if s.seq >= Int64(seq) { s.seq -= 1 }
                if s.from >= Int64(seq) { s.from -= 1 }
                s.hash = hashes[s.seq]!
                return s
            }
            state.sealed = seals.last!.seq
        }
    }

    @Test func anIntactTrailChecksOutWithAndWithoutTheKey() {
        let t = Trail(records: 9, perEpoch: 2)
        let plain = t.check(key: nil)
        #expect(plain.whole, "\(String(describing: plain.problem))")
        #expect(plain.sealing?.lastEpoch == 5 && plain.sealing?.sealedThrough == 9 && plain.sealing?.checkedWithKey == false)
        let keyed = t.check(key: Self.k0)
        #expect(keyed.whole && keyed.sealing?.checkedWithKey == true, "\(String(describing: keyed.problem))")
    }

    @Test func aRemovedRecordWithTheChainAndTheSealsRedoneIsCaughtByTheKeyAlone() {
        var t = Trail(records: 9, perEpoch: 2)
        t.removeWithCare(4)
        // Without the key every place fits: that is what the key is for.
        #expect(t.check(key: nil).whole)
        let v = t.check(key: Self.k0)
        #expect(v.problem?.kind == .sealForged)
        // Records 3–4 were epoch 2's: the first epoch whose tag no longer fits.
        #expect(v.problem?.message.contains("epoch 2") == true, "\(String(describing: v.problem))")
    }

    @Test func aRewriteThatLeftTheSealsAloneIsCaughtWithoutTheKey() {
        var t = Trail(records: 9, perEpoch: 2)
        let seals = t.seals
        t.removeWithCare(4)
        t.seals = seals
        let v = t.check(key: nil)
        #expect(v.problem?.kind == .sealMismatch || v.problem?.kind == .cut, "\(String(describing: v.problem))")
    }

    @Test func aMissingSealOrACutTailFailsWithoutTheKey() {
        var gap = Trail(records: 9, perEpoch: 2)
        gap.seals.remove(at: 2)
        #expect(gap.check(key: nil).problem?.kind == .sealMissing)

        // The tail cut with its seal, the chain's seal following: the key file is ahead.
        var cut = Trail(records: 9, perEpoch: 2)
        cut.lines.removeLast()
        cut.seals.removeLast()
        let v = cut.check(key: nil)
        #expect(v.problem?.kind == .cut && v.problem?.message.contains("epoch 5") == true, "\(String(describing: v.problem))")

        // The seals file gone.
        var gone = Trail(records: 9, perEpoch: 2)
        gone.seals = []
        #expect(gone.check(key: nil).problem?.kind == .sealMissing)

        // A record added after the last seal: the chain's seal already says so.
        var added = Trail(records: 9, perEpoch: 2)
        added.lines.append(AuditLine.render(AuditRecord(seq: 10, at: "2026-11-27T10:00:00.000Z", event: .pause, actor: .daemon,
                                                        outcome: .ok, details: [:], prev: AuditLine.hash(added.lines.last!))))
        #expect(added.check(key: nil).problem?.kind == .added)
    }

    @Test func aKeyFilePutBackOrReplacedShows() {
        var behind = Trail(records: 4, perEpoch: 1)
        behind.state.epoch -= 1
        #expect(behind.check(key: nil).problem?.kind == .sealMismatch)
        // Its epoch set right but not its key (nobody has the old one): only the key tells.
        var replaced = Trail(records: 4, perEpoch: 1)
        replaced.state.commitment = String(repeating: "0", count: 64)
        #expect(replaced.check(key: nil).whole)
        #expect(replaced.check(key: Self.k0).problem?.kind == .sealForged)
        // Another NAS's key, or one made after the seals were wiped.
        #expect(Trail(records: 4, perEpoch: 1).check(key: .generate()).problem?.kind == .wrongKey)
    }
}

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
