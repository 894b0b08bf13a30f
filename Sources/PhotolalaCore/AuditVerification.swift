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

    package var whole: Bool { problem == nil }
    /// Lines read, in every file kept.
    package var records: Int
    package var firstSeq: Int64?
    package var lastSeq: Int64?
    /// Oldest first.
    package var files: [String]
    package var problem: Problem?

    package init(records: Int, firstSeq: Int64?, lastSeq: Int64?, files: [String], problem: Problem?) {
        self.records = records
        self.firstSeq = firstSeq
        self.lastSeq = lastSeq
        self.files = files
        self.problem = problem
    }

    private enum CodingKeys: String, CodingKey { case whole, records, firstSeq, lastSeq, files, problem }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        records = try c.decode(Int.self, forKey: .records)
        firstSeq = try c.decodeIfPresent(Int64.self, forKey: .firstSeq)
        lastSeq = try c.decodeIfPresent(Int64.self, forKey: .lastSeq)
        files = try c.decode([String].self, forKey: .files)
        problem = try c.decodeIfPresent(Problem.self, forKey: .problem)
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(whole, forKey: .whole)
        try c.encode(records, forKey: .records)
        try c.encode(firstSeq, forKey: .firstSeq)
        try c.encode(lastSeq, forKey: .lastSeq)
        try c.encode(files, forKey: .files)
        try c.encode(problem, forKey: .problem)
    }
}
