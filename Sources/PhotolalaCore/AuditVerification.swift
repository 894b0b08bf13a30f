/// `photolalactl audit --verify`: whether the trail's chain is whole, and if not the first
/// record that does not fit, named by its number, file and line.
package struct AuditVerification: Codable, Sendable, Equatable {
    package struct Problem: Codable, Sendable, Equatable {
        package enum Kind: String, Codable, Sendable {
            /// A line that is not a record (cut short, overwritten).
            case damaged
            /// A record whose bytes changed after it was written.
            case edited
            /// A line that was never part of the chain.
            case inserted
            /// Records missing between two that are there.
            case removed
            /// Records out of their order.
            case reordered
            /// Records missing at the end: the queue database says the trail went further.
            case cut
            /// Records after the last one the queue database knows of.
            case added
            /// Records missing at the start: the trail begins after where it should.
            case truncatedStart
            // The forward seals (cli.md "Forward sealing"):
            /// A line of `audit.seals` that is not a seal.
            case sealDamaged
            /// Seals, the seals file or the sealing key missing.
            case sealMissing
            /// A seal that does not fit the trail or the seals around it (records changed
            /// after they were sealed, a seal changed, the key file put back).
            case sealMismatch
            /// A seal (or the key file) that does not check out with the verification key.
            case sealForged
            /// Records after the last seal: not written by photolalad.
            case unsealed
            /// The verification key given is not the one the trail is sealed with.
            case wrongKey
        }
        package var kind: Kind
        /// The record named (its `seq`), when the line holds one.
        package var seq: Int64?
        /// `audit.log`, `audit.log.1` or `audit.log.2`; nil when the place is past the last line.
        package var file: String?
        /// 1-based, within `file`.
        package var line: Int?
        package var message: String

        package init(kind: Kind, seq: Int64?, file: String?, line: Int?, message: String) {
            self.kind = kind
            self.seq = seq
            self.file = file
            self.line = line
            self.message = message
        }
    }

    /// What the forward seals say of the trail (nil from a daemon before forward sealing).
    package struct Sealing: Codable, Sendable, Equatable {
        /// The verification key's fingerprint (nil: no sealing key).
        package var fingerprint: String?
        /// Seals kept (one an epoch), the first and last epoch among them.
        package var epochs: Int
        package var firstEpoch: UInt64?
        package var lastEpoch: UInt64?
        /// The last record sealed, and when.
        package var sealedThrough: Int64?
        package var sealedAt: String?
        /// Records up to this one were there before the trail was first sealed (an upgrade):
        /// only the chain speaks for them.
        package var unsealedBefore: Int64?
        /// The seals' tags were checked with the verification key (`--verification-key`).
        package var checkedWithKey: Bool

        package init(fingerprint: String?, epochs: Int, firstEpoch: UInt64?, lastEpoch: UInt64?, sealedThrough: Int64?,
                     sealedAt: String?, unsealedBefore: Int64?, checkedWithKey: Bool) {
            self.fingerprint = fingerprint
            self.epochs = epochs
            self.firstEpoch = firstEpoch
            self.lastEpoch = lastEpoch
            self.sealedThrough = sealedThrough
            self.sealedAt = sealedAt
            self.unsealedBefore = unsealedBefore
            self.checkedWithKey = checkedWithKey
        }
    }

    package var whole: Bool { problem == nil }
    /// Lines read, in every file kept.
    package var records: Int
    package var firstSeq: Int64?
    package var lastSeq: Int64?
    /// Oldest first.
    package var files: [String]
    package var problem: Problem?
    package var sealing: Sealing?

    package init(records: Int, firstSeq: Int64?, lastSeq: Int64?, files: [String], problem: Problem?, sealing: Sealing? = nil) {
        self.records = records
        self.firstSeq = firstSeq
        self.lastSeq = lastSeq
        self.files = files
        self.problem = problem
        self.sealing = sealing
    }

    private enum CodingKeys: String, CodingKey { case whole, records, firstSeq, lastSeq, files, problem, sealing }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        records = try c.decode(Int.self, forKey: .records)
        firstSeq = try c.decodeIfPresent(Int64.self, forKey: .firstSeq)
        lastSeq = try c.decodeIfPresent(Int64.self, forKey: .lastSeq)
        files = try c.decode([String].self, forKey: .files)
        problem = try c.decodeIfPresent(Problem.self, forKey: .problem)
        sealing = try c.decodeIfPresent(Sealing.self, forKey: .sealing)
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(whole, forKey: .whole)
        try c.encode(records, forKey: .records)
        try c.encode(firstSeq, forKey: .firstSeq)
        try c.encode(lastSeq, forKey: .lastSeq)
        try c.encode(files, forKey: .files)
        try c.encode(problem, forKey: .problem)
        try c.encodeIfPresent(sealing, forKey: .sealing)
    }
}
