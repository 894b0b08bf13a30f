import PhotolalaCore

/// What the sealing key file shows to a verifier: where the key stands, never the key.
package struct SealingState: Codable, Sendable, Equatable {
    /// The epoch the key is at: the next batch is sealed with it.
    package var epoch: UInt64
    /// The last record sealed (the next seal's `from`).
    package var sealed: Int64
    /// The verification key's fingerprint.
    package var fingerprint: String
    /// `SealingKey.commitment` of the key at `epoch`.
    package var commitment: String

    package init(epoch: UInt64, sealed: Int64, fingerprint: String, commitment: String) {
        self.epoch = epoch
        self.sealed = sealed
        self.fingerprint = fingerprint
        self.commitment = commitment
    }
}

/// Checks the trail's forward seals (docs/audit-seal.md) against its records: without the
/// verification key, that every seal is there and fits (each epoch after the one before,
/// each naming a record the trail holds with that record's hash, the key's epoch right
/// after the last, nothing after the last seal); with it, that each seal's tag is the one
/// only that epoch's key could make, and the key file holds the key of its epoch. Fed the
/// records in order (as the chain check is); pure, so the daemon (without the key) and
/// the command (with it) run the same code.
package struct AuditSealCheck: Sendable {
    package struct Entry: Sendable, Equatable {
        /// nil: the line is not a seal.
        package var seal: AuditSeal?
        /// 1-based, in `audit.seals`.
        package var line: Int
        package init(seal: AuditSeal?, line: Int) {
            self.seal = seal
            self.line = line
        }
    }

    private let entries: [Entry]
    private let state: SealingState?
    private let head: AuditMark
    private let key: VerificationKey?
    /// The hash of each record a seal names, as the trail holds it.
    private var found: [Int64: String] = [:]
    private let wanted: Set<Int64>
    private var last: AuditMark?

    package static let fileName = "audit.seals"

    /// - Parameters:
    ///   - entries: `audit.seals`, line by line (empty when the file is missing).
    ///   - state: the sealing key file's state (nil: no key file).
    ///   - head: the record the oldest kept file follows.
    ///   - key: the verification key, when the person checking gave it.
    package init(entries: [Entry], state: SealingState?, head: AuditMark, key: VerificationKey?) {
        self.entries = entries
        self.state = state
        self.head = head
        self.key = key
        wanted = Set(entries.compactMap { $0.seal?.seq })
    }

    /// The next record of the trail, oldest first: its number (nil: not a record) and the
    /// hash of its line.
    package mutating func add(seq: Int64?, hash: String) {
        guard let seq else { return }
        if wanted.contains(seq), found[seq] == nil { found[seq] = hash }
        last = AuditMark(seq: seq, hash: hash)
    }

    /// The first problem, and what the seals say of the trail.
    package func finish() -> (problem: AuditVerification.Problem?, sealing: AuditVerification.Sealing) {
        var summary = AuditVerification.Sealing(fingerprint: state?.fingerprint, epochs: 0, firstEpoch: nil, lastEpoch: nil,
                                                sealedThrough: nil, sealedAt: nil, unsealedBefore: nil, checkedWithKey: key != nil)
        let seals = entries.compactMap(\.seal)
        if let first = seals.first {
            summary.epochs = seals.count
            summary.firstEpoch = first.epoch
            summary.lastEpoch = seals.last?.epoch
            summary.sealedThrough = seals.last?.seq
            summary.sealedAt = seals.last?.at
            // Records a first seal (epoch 0) found already there predate forward sealing.
            if first.epoch == 0, first.seq > 0 { summary.unsealedBefore = first.seq }
        }
        return (problem(seals), summary)
    }

    private func problem(_ seals: [AuditSeal]) -> AuditVerification.Problem? {
        if let bad = entries.first(where: { $0.seal == nil }) {
            return .init(kind: .sealDamaged, seq: nil, file: Self.fileName, line: bad.line,
                         message: "\(Self.fileName), line \(bad.line) is not a seal: it was cut short or overwritten")
        }
        guard let state else {
            if seals.isEmpty && last == nil { return nil }
            return .init(kind: .sealMissing, seq: nil, file: nil, line: nil,
                         message: "the audit trail's sealing key (audit-seal.key) is gone: nothing proves the records are the ones photolalad sealed")
        }
        if let key, key.fingerprint != state.fingerprint {
            return .init(kind: .wrongKey, seq: nil, file: nil, line: nil,
                         message: "this verification key (fingerprint \(key.fingerprint)) is not the one this trail is sealed with (fingerprint \(state.fingerprint)): the trail was sealed anew, or the key belongs to another NAS")
        }
        if let other = entries.first(where: { $0.seal?.key != state.fingerprint }), let seal = other.seal {
            return .init(kind: .sealMissing, seq: seal.seq, file: Self.fileName, line: other.line,
                         message: "epoch \(seal.epoch) (\(Self.fileName), line \(other.line)) was sealed under another verification key (fingerprint \(seal.key)): the sealing key was replaced after it, so the trail before it cannot be proven with this one")
        }
        guard let first = seals.first, let lastSeal = seals.last else {
            if state.epoch == 0 && last == nil { return nil }
            return .init(kind: .sealMissing, seq: nil, file: Self.fileName, line: nil,
                         message: "the trail's seals (\(Self.fileName)) are gone, though its sealing key is at epoch \(state.epoch)")
        }
        if first.epoch > 0 && first.from > head.seq {
            return .init(kind: .sealMissing, seq: first.from, file: Self.fileName, line: entries.first?.line,
                         message: "the seals of the epochs before epoch \(first.epoch) are missing: records \(head.seq + 1)–\(first.from) were sealed by them")
        }
        var previous: (seal: AuditSeal, line: Int)?
        for entry in entries {
            guard let seal = entry.seal else { continue }
            let place = "\(Self.fileName), line \(entry.line)"
            if let (before, _) = previous {
                if seal.epoch != before.epoch + 1 {
                    let missing = seal.epoch == before.epoch + 2 ? "the seal of epoch \(before.epoch + 1) is" : "the seals of epochs \(before.epoch + 1)–\(seal.epoch - 1) are"
                    return .init(kind: .sealMissing, seq: before.seq + 1, file: Self.fileName, line: entry.line,
                                 message: "\(missing) missing before epoch \(seal.epoch) (\(place))")
                }
                if seal.from != before.seq {
                    return .init(kind: .sealMismatch, seq: seal.from, file: Self.fileName, line: entry.line,
                                 message: "epoch \(seal.epoch) (\(place)) does not start where epoch \(before.epoch) ended (record \(before.seq)): its seal was changed")
                }
                if seal.at < before.at {
                    return .init(kind: .sealMismatch, seq: seal.seq, file: Self.fileName, line: entry.line,
                                 message: "epoch \(seal.epoch) (\(place)) is dated before epoch \(before.epoch): its seal was changed")
                }
            }
            if seal.seq == seal.from && seal.epoch > 0 {
                return .init(kind: .sealMismatch, seq: seal.seq, file: Self.fileName, line: entry.line,
                             message: "epoch \(seal.epoch) (\(place)) seals no record: its seal was changed")
            }
            if let problem = matches(seal, place: place, line: entry.line) { return problem }
            previous = (seal, entry.line)
        }
        if let last, last.seq > lastSeal.seq {
            return .init(kind: .unsealed, seq: lastSeal.seq + 1, file: nil, line: nil,
                         message: last.seq == lastSeal.seq + 1
                            ? "record \(last.seq) was not sealed by photolalad: it was added after epoch \(lastSeal.epoch), the last sealed"
                            : "records \(lastSeal.seq + 1)–\(last.seq) were not sealed by photolalad: they were added after epoch \(lastSeal.epoch), the last sealed")
        }
        if state.epoch > lastSeal.epoch + 1 {
            let missing = state.epoch == lastSeal.epoch + 2 ? "the seal of epoch \(lastSeal.epoch + 1) is" : "the seals of epochs \(lastSeal.epoch + 1)–\(state.epoch - 1) are"
            return .init(kind: .cut, seq: lastSeal.seq + 1, file: nil, line: nil,
                         message: "the trail was cut: \(missing) missing after record \(lastSeal.seq) (the sealing key is at epoch \(state.epoch))")
        }
        if state.epoch <= lastSeal.epoch || state.sealed != lastSeal.seq {
            return .init(kind: .sealMismatch, seq: lastSeal.seq, file: nil, line: nil,
                         message: "the sealing key file (epoch \(state.epoch), record \(state.sealed)) does not follow the last seal (epoch \(lastSeal.epoch), record \(lastSeal.seq)): it was put back or changed")
        }
        if lastSeal.head != head {
            return .init(kind: .sealMismatch, seq: head.seq, file: nil, line: nil,
                         message: "the trail's start moved after epoch \(lastSeal.epoch) was sealed (it started after record \(lastSeal.head.seq), the queue database now says \(head.seq)): records were removed from its start")
        }
        guard let key else { return nil }
        var epochKey = key.first
        for entry in entries {
            guard let seal = entry.seal else { continue }
            epochKey = epochKey.advanced(by: seal.epoch - epochKey.epoch)
            if epochKey.tag(seal) != seal.tag {
                return .init(kind: .sealForged, seq: seal.seq, file: Self.fileName, line: entry.line,
                             message: "epoch \(seal.epoch) (\(Self.fileName), line \(entry.line)) does not check out with the verification key: its seal, or records \(seal.from + 1)–\(seal.seq) it seals, were changed after they were sealed")
            }
        }
        if epochKey.advanced(by: state.epoch - epochKey.epoch).commitment != state.commitment {
            return .init(kind: .sealForged, seq: nil, file: nil, line: nil,
                         message: "the sealing key file does not hold the key of epoch \(state.epoch): it was replaced, so epochs after \(lastSeal.epoch) may be missing")
        }
        return nil
    }

    /// The record a seal names, against the trail.
    private func matches(_ seal: AuditSeal, place: String, line: Int) -> AuditVerification.Problem? {
        if seal.seq < head.seq { return nil }
        let actual: String?
        if seal.seq == head.seq {
            actual = head.hash
        } else {
            actual = found[seal.seq]
        }
        guard let actual else {
            if let last, seal.seq > last.seq {
                let missing = seal.seq == last.seq + 1 ? "record \(seal.seq) is" : "records \(last.seq + 1)–\(seal.seq) are"
                return .init(kind: .cut, seq: last.seq + 1, file: nil, line: nil,
                             message: "the trail was cut: \(missing) missing after record \(last.seq); epoch \(seal.epoch) (\(place)) sealed up to record \(seal.seq)")
            }
            return .init(kind: .sealMismatch, seq: seal.seq, file: Self.fileName, line: line,
                         message: "record \(seal.seq), which epoch \(seal.epoch) (\(place)) sealed, is not in the trail")
        }
        guard actual == seal.hash else {
            return .init(kind: .sealMismatch, seq: seal.seq, file: Self.fileName, line: line,
                         message: "records up to \(seal.seq) were changed after epoch \(seal.epoch) (\(place)) sealed them: record \(seal.seq) is not the record it sealed")
        }
        return nil
    }
}
