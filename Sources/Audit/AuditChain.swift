/// Audit: the tamper-evident trail of who did what (cli.md "audit"), the chain that checks it.
import Foundation
import PhotolalaCore

/// A place in the chain: a record's number and the hex SHA-256 of its line. The queue
/// database keeps two: the last record written (the seal, so a cut tail is caught) and the
/// one before the oldest kept (the head, so a cut start is caught once files rotated away).
package struct AuditMark: Sendable, Equatable, CustomStringConvertible {
    package var seq: Int64
    package var hash: String

    package init(seq: Int64, hash: String) {
        self.seq = seq
        self.hash = hash
    }

    /// Before the first record of a new trail: its `prev` is 64 zeros.
    package static let origin = AuditMark(seq: 0, hash: String(repeating: "0", count: 64))

    /// "42 <hash>", as the `setting` table holds it.
    package var description: String { "\(seq) \(hash)" }

    package init?(_ text: String) {
        let parts = text.split(separator: " ")
        guard parts.count == 2, let seq = Int64(parts[0]), seq >= 0, parts[1].count == 64 else { return nil }
        self.init(seq: seq, hash: String(parts[1]))
    }
}

/// The chain of a trail, checked line by line (oldest file first): each record's `seq` one
/// more than the last, its `prev` the SHA-256 of the line before. Names the first record
/// that does not fit, and why: edited, inserted, removed, reordered, damaged, or a tail
/// cut (against the seal). Pure: the trail feeds it lines, tests feed it plain strings.
///
/// It keeps four lines' worth of state whatever the trail's size: a break is classified
/// from the two records before it and the one after it.
package struct AuditChain: Sendable {
    /// One line as checked: what it claims (`seq`, `prev`, nil when it is not a record) and
    /// where it is.
    struct Entry: Sendable {
        var seq: Int64?
        var prev: String?
        var hash: String
        var file: String?
        var line: Int?

        var mark: AuditMark? { seq.map { AuditMark(seq: $0, hash: hash) } }
        var place: String {
            guard let file, let line else { return "where the trail starts" }
            return "\(file), line \(line)"
        }
    }

    private var window: [Entry]
    private var lines = 0
    private var firstSeq: Int64?
    private var lastSeq: Int64?
    private var files: [String] = []
    private var problem: AuditVerification.Problem?

    /// `start`: the record the oldest kept one follows (the head; `.origin` for a trail
    /// never rotated away).
    package init(start: AuditMark) {
        window = [Entry(seq: start.seq, prev: nil, hash: start.hash, file: nil, line: nil)]
    }

    /// Feeds the next line (without its newline), `line` counted from 1 within `file`.
    /// Answers what the seals need of it: its number (nil: not a record) and its hash.
    @discardableResult
    package mutating func add(_ bytes: some Collection<UInt8>, file: String, line: Int) -> (seq: Int64?, hash: String) {
        if files.last != file { files.append(file) }
        lines += 1
        let head = AuditLine.head(bytes)
        if let seq = head?.seq {
            if firstSeq == nil { firstSeq = seq }
            lastSeq = seq
        }
        let hash = AuditLine.hash(bytes)
        guard problem == nil else { return (head?.seq, hash) }
        defer { if window.count > 4 { window.removeFirst() } }
        window.append(Entry(seq: head?.seq, prev: head?.prev, hash: hash, file: file, line: line))
        // The entry before this one can be judged now that its follower is known.
        if window.count >= 3 { judge(at: window.count - 2, seal: nil) }
        return (head?.seq, hash)
    }

    /// The verdict, given the seal (the last record the queue database knows of; nil when
    /// the database lost it, and then a cut tail cannot be told).
    package func finish(seal: AuditMark?) -> AuditVerification {
        var chain = self
        if chain.problem == nil, chain.window.count >= 2 { chain.judge(at: chain.window.count - 1, seal: seal) }
        if chain.problem == nil, let seal, let last = chain.window.last { chain.problem = Self.tail(last, seal: seal) }
        return AuditVerification(records: lines, firstSeq: firstSeq, lastSeq: lastSeq, files: files, problem: chain.problem)
    }

    /// A file's lines, without their newlines; a last line without one counts too (a
    /// record cut short shows as damaged).
    package static func lines(of bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var out = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if bytes.last == UInt8(ascii: "\n") || bytes.isEmpty { out.removeLast() }
        return out
    }

    /// Checks a whole trail given as text, oldest file first: for tests and tools.
    package static func verify(files: [(name: String, text: String)], start: AuditMark, seal: AuditMark?) -> AuditVerification {
        var chain = AuditChain(start: start)
        for (name, text) in files {
            for (i, line) in lines(of: Array(text.utf8)).enumerated() { chain.add(line, file: name, line: i + 1) }
        }
        return chain.finish(seal: seal)
    }

    /// Whether `window[i]` follows `window[i - 1]`; if not, records the first problem.
    private mutating func judge(at i: Int, seal: AuditMark?) {
        let before = window[i - 1]
        let entry = window[i]
        let next = i + 1 < window.count ? window[i + 1] : nil
        let beforeThat = i >= 2 ? window[i - 2] : nil
        problem = Self.problem(entry, after: before, beforeThat: beforeThat, next: next, seal: seal)
    }

    static func problem(_ e: Entry, after b: Entry, beforeThat: Entry?, next: Entry?, seal: AuditMark?) -> AuditVerification.Problem? {
        guard let bSeq = b.seq else { return nil }
        if e.seq == bSeq + 1 && e.prev == b.hash { return nil }
        let isStart = b.file == nil
        // The record after this line chains to the one before it: the line is not part of
        // the chain (or it stands in the place of the next, swapped with it).
        if let next, next.seq == bSeq + 1, next.prev == b.hash {
            if e.seq == bSeq + 2 {
                return .init(kind: .reordered, seq: e.seq, file: e.file, line: e.line,
                             message: "records \(bSeq + 1) and \(bSeq + 2) are out of order: record \(bSeq + 2) (\(e.place)) comes before record \(bSeq + 1) (\(next.place))")
            }
            return .init(kind: .inserted, seq: e.seq, file: e.file, line: e.line,
                         message: "\(e.place) was inserted: it is not part of the chain (the record after it follows the one before it)")
        }
        guard let seq = e.seq, e.prev != nil else {
            return .init(kind: .damaged, seq: nil, file: e.file, line: e.line,
                         message: "\(e.place) is not an audit record: it was cut short or overwritten")
        }
        // After the last record photolalad sealed: a line someone added.
        if next == nil, let seal, seal == b.mark {
            return .init(kind: .added, seq: seq, file: e.file, line: e.line,
                         message: "\(e.place) was added after the last record photolalad wrote (record \(bSeq))")
        }
        if seq == bSeq + 1 {
            // The right number with the wrong `prev`: the record before changed, unless this
            // one did (then the record after it does not chain to it either).
            let intact = next.map { $0.prev == e.hash } ?? (seal.map { $0 == AuditMark(seq: seq, hash: e.hash) } ?? true)
            if intact && !isStart {
                return .init(kind: .edited, seq: bSeq, file: b.file, line: b.line,
                             message: "record \(bSeq) (\(b.place)) was changed after it was written: the next record's prev is not the hash of its line")
            }
            return .init(kind: .edited, seq: seq, file: e.file, line: e.line,
                         message: isStart && intact
                            ? "record \(seq) (\(e.place)) does not follow the record the trail starts after (the queue database's head): it or the start was changed"
                            : "record \(seq) (\(e.place)) was changed after it was written: its prev does not match the record before it")
        }
        if let next, next.seq == bSeq + 2 {
            return .init(kind: .edited, seq: seq, file: e.file, line: e.line,
                         message: "the record at \(e.place) was changed after it was written: it says \(seq) where record \(bSeq + 1) belongs")
        }
        if seq > bSeq + 1 {
            let missing = seq - bSeq - 1 == 1 ? "record \(bSeq + 1) is" : "records \(bSeq + 1)–\(seq - 1) are"
            if isStart {
                return .init(kind: .truncatedStart, seq: seq, file: e.file, line: e.line,
                             message: "\(missing) missing at the start: the trail begins with record \(seq) (\(e.place)), where record \(bSeq + 1) belongs")
            }
            return .init(kind: .removed, seq: seq, file: e.file, line: e.line,
                         message: "\(missing) missing before record \(seq) (\(e.place))")
        }
        if let beforeThat, let btSeq = beforeThat.seq, seq == btSeq + 1, e.prev == beforeThat.hash {
            return .init(kind: .inserted, seq: bSeq, file: b.file, line: b.line,
                         message: "record \(bSeq) (\(b.place)) was inserted: it is not part of the chain (the record after it follows the one before it)")
        }
        return .init(kind: .reordered, seq: seq, file: e.file, line: e.line,
                     message: "record \(seq) (\(e.place)) is out of order: it comes after record \(bSeq)")
    }

    /// The last record against the seal the queue database keeps.
    static func tail(_ last: Entry, seal: AuditMark) -> AuditVerification.Problem? {
        guard let seq = last.seq, !(seq == seal.seq && last.hash == seal.hash) else { return nil }
        if last.file == nil {
            // Not one record: only the start is left.
            guard seal.seq > seq else { return nil }
            return .init(kind: .cut, seq: seal.seq, file: nil, line: nil,
                         message: "every record is gone: the queue database says the trail ends with record \(seal.seq)")
        }
        if seal.seq > seq {
            let missing = seal.seq - seq == 1 ? "record \(seal.seq) is" : "records \(seq + 1)–\(seal.seq) are"
            return .init(kind: .cut, seq: seq + 1, file: nil, line: nil,
                         message: "the trail was cut: \(missing) missing after record \(seq) (\(last.place)); the queue database says it ends with record \(seal.seq)")
        }
        if seal.seq == seq {
            return .init(kind: .edited, seq: seq, file: last.file, line: last.line,
                         message: "record \(seq) (\(last.place)), the last, was changed after it was written: its hash is not the one the queue database kept")
        }
        return .init(kind: .added, seq: seal.seq + 1, file: last.file, line: last.line,
                     message: "records \(seal.seq + 1)–\(seq) were not written by photolalad: the queue database says the trail ends with record \(seal.seq)")
    }
}
