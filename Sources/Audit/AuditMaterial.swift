#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PhotolalaCore

/// What `audit --verify --verification-key` checks, as the daemon sends it to the command
/// (`GET /v1/audit/sealed`, root and the daemon's user): one JSON line (the head, the
/// seal, the sealing key file's state, and each part's name and size), then each part's
/// bytes as they are on disk, `audit.seals` first, then the trail's files oldest first.
/// The command checks it all itself with the key, which never reaches the daemon.
package struct AuditMaterial: Sendable {
    package struct Part: Sendable {
        package var name: String
        package var size: Int64
        /// Open for reading; whoever sends the material closes it.
        package var fd: Int32
    }

    package var head: AuditMark
    package var seal: AuditMark
    package var state: SealingState?
    package var parts: [Part]

    /// `files` of `directory` that exist, opened now (their sizes now: what is written
    /// later is left out), in the order given.
    init(directory: String, files: [String], head: AuditMark, seal: AuditMark, state: SealingState?) {
        self.head = head
        self.seal = seal
        self.state = state
        parts = files.compactMap { name in
            let fd = open(directory + "/" + name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            var st = stat()
            guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
                _ = Glibc.close(fd)
                return nil
            }
            return Part(name: name, size: Int64(st.st_size), fd: fd)
        }
    }

    struct Header: Codable {
        struct PartInfo: Codable {
            var name: String
            var size: Int64
        }
        var format: Int
        var head: String
        var seal: String
        var state: SealingState?
        var parts: [PartInfo]
    }

    /// The first line, with its newline.
    package var header: [UInt8] {
        let h = Header(format: 1, head: head.description, seal: seal.description, state: state,
                       parts: parts.map { .init(name: $0.name, size: $0.size) })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(h)) ?? Data("{}".utf8)) + [UInt8(ascii: "\n")]
    }

    package func close() {
        for part in parts { _ = Glibc.close(part.fd) }
    }
}

/// The command's side: reads the material as it arrives and checks the chain and the
/// seals with the verification key, in constant memory but for `audit.seals` (small).
package struct AuditMaterialReader {
    package struct Failure: Error, CustomStringConvertible {
        package var message: String
        package var description: String { message }
    }

    private let key: VerificationKey
    private var buffer: [UInt8] = []
    private var header: AuditMaterial.Header?
    private var part = 0
    private var left: Int64 = 0
    private var sealsBytes: [UInt8] = []
    private var chain: AuditChain?
    private var check: AuditSealCheck?
    private var lineNumber = 0
    static let maxLine = 1 << 20
    static let maxHeader = 64 << 10

    package init(key: VerificationKey) {
        self.key = key
    }

    package mutating func feed(_ bytes: UnsafeRawBufferPointer) throws(Failure) {
        try feed(Array(bytes))
    }

    package mutating func feed(_ bytes: [UInt8]) throws(Failure) {
        var rest = bytes[...]
        if header == nil {
            guard let newline = rest.firstIndex(of: UInt8(ascii: "\n")) else {
                buffer += rest
                if buffer.count > Self.maxHeader { throw Failure(message: "the daemon's answer does not start with its header") }
                return
            }
            buffer += rest[..<newline]
            rest = rest[(newline + 1)...]
            guard let h = try? JSONDecoder().decode(AuditMaterial.Header.self, from: Data(buffer)), h.format == 1,
                  AuditMark(h.head) != nil, AuditMark(h.seal) != nil else {
                throw Failure(message: "the daemon's answer has no header this photolalactl reads (update both together)")
            }
            header = h
            buffer = []
            startPart(0)
        }
        while !rest.isEmpty {
            guard let header, part < header.parts.count else {
                throw Failure(message: "the daemon sent more than it announced")
            }
            let take = Int(min(Int64(rest.count), left))
            consume(rest.prefix(take))
            rest = rest.dropFirst(take)
            left -= Int64(take)
            if left == 0 { endPart() }
        }
    }

    /// The verdict, once everything arrived.
    package mutating func finish() throws(Failure) -> AuditVerification {
        guard let header, part >= header.parts.count else {
            throw Failure(message: "the daemon's answer was cut short: nothing can be said of the trail")
        }
        if chain == nil { beginTrail() }
        var verdict = chain!.finish(seal: AuditMark(header.seal)!)
        let (problem, sealing) = check!.finish()
        if verdict.problem == nil { verdict.problem = problem }
        verdict.sealing = sealing
        return verdict
    }

    private mutating func startPart(_ index: Int) {
        part = index
        lineNumber = 0
        guard let header else { return }
        while part < header.parts.count && header.parts[part].size == 0 {
            if header.parts[part].name != AuditSealCheck.fileName && chain == nil { beginTrail() }
            part += 1
        }
        if part < header.parts.count {
            left = header.parts[part].size
            if header.parts[part].name != AuditSealCheck.fileName && chain == nil { beginTrail() }
        }
    }

    private mutating func endPart() {
        if let header, header.parts[part].name != AuditSealCheck.fileName, !buffer.isEmpty {
            // A last line without its newline counts too (the chain shows it damaged).
            line(buffer, file: header.parts[part].name)
            buffer = []
        }
        startPart(part + 1)
    }

    private mutating func beginTrail() {
        guard let header else { return }
        let head = AuditMark(header.head)!
        chain = AuditChain(start: head)
        check = AuditSealCheck(entries: AuditSealStore.entries(of: sealsBytes), state: header.state, head: head, key: key)
        sealsBytes = []
    }

    private mutating func consume(_ bytes: ArraySlice<UInt8>) {
        guard let header else { return }
        let name = header.parts[part].name
        if name == AuditSealCheck.fileName {
            if sealsBytes.count < AuditSealStore.maxSealsSize { sealsBytes += bytes }
            return
        }
        var rest = bytes
        while let newline = rest.firstIndex(of: UInt8(ascii: "\n")) {
            buffer += rest[..<newline]
            line(buffer, file: name)
            buffer = []
            rest = rest[(newline + 1)...]
        }
        if buffer.count < Self.maxLine { buffer += rest }
    }

    private mutating func line(_ bytes: [UInt8], file: String) {
        lineNumber += 1
        let (seq, hash) = chain!.add(bytes, file: file, line: lineNumber)
        check!.add(seq: seq, hash: hash)
    }
}
