#if canImport(Glibc)
import Glibc
#endif
import Digests
import Foundation
import PhotolalaCore

/// The forward seal's files in `state_dir` (docs/audit-seal.md), all 0600:
///
/// - `audit-seal.key`: the sealing key of the current epoch, with the last record sealed,
///   when the verification key was made and shown, and its fingerprint. One fixed-width
///   line, overwritten in place (the same bytes of the same block) at each epoch and
///   synced, so the previous epoch's key is gone from the file once the next is written.
/// - `audit-verification-key`: the verification key, only until root has been shown it
///   (`audit --verification-key`); then overwritten and unlinked (`Shred`).
/// - `audit.seals`: one line a sealed epoch, appended and synced before the key moves on;
///   rewritten without the seals of records rotation dropped.
package struct AuditSealStore: Sendable {
    package static let keyFile = "audit-seal.key"
    package static let pendingFile = "audit-verification-key"
    package static let sealsFile = AuditSealCheck.fileName
    static let keyMagic = "photolala-audit-sealing-key v1"
    static let pendingMagic = "photolala-audit-verification-key v1"
    /// Far more than a trail's seals ever take (a line is about 300 bytes; rotation drops
    /// the seals of dropped records): anything larger is read only this far.
    static let maxSealsSize = 64 << 20

    package struct Failure: Error, Equatable, CustomStringConvertible {
        package var message: String
        init(_ message: String) { self.message = message }
        package var description: String { message }
    }

    /// What `audit-seal.key` holds.
    package struct KeyState: Sendable, Equatable, CustomStringConvertible {
        package var key: SealingKey
        /// The last record sealed: the next seal's `from`.
        package var sealed: Int64
        /// When the verification key was made and when root was shown it (Unix ms).
        package var createdAt: Int64
        package var shownAt: Int64?
        package var fingerprint: String

        package init(key: SealingKey, sealed: Int64, createdAt: Int64, shownAt: Int64?, fingerprint: String) {
            self.key = key
            self.sealed = sealed
            self.createdAt = createdAt
            self.shownAt = shownAt
            self.fingerprint = fingerprint
        }

        /// What a verifier is shown of it.
        package var visible: SealingState {
            SealingState(epoch: key.epoch, sealed: sealed, fingerprint: fingerprint, commitment: key.commitment)
        }

        package var description: String { "KeyState(epoch \(key.epoch), sealed \(sealed), fingerprint \(fingerprint))" }
    }

    package let directory: String

    package init(directory: String) {
        self.directory = directory
    }

    // MARK: the sealing key

    /// The state, nil when there is no key file.
    package func loadState() throws(Failure) -> KeyState? {
        guard let bytes = try read(Self.keyFile, limit: 4096) else { return nil }
        guard let state = Self.decodeState(bytes) else {
            throw Failure("\(path(Self.keyFile)) is not the sealing key file photolalad writes")
        }
        return state
    }

    /// Writes the state: in place over the previous one (the same length, the same block),
    /// synced; a first one through a temporary file renamed into place.
    package func saveState(_ state: KeyState) throws(Failure) {
        let bytes = Self.encodeState(state)
        let fd = open(path(Self.keyFile), O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            guard errno == ENOENT else { throw Failure("cannot open \(path(Self.keyFile)): \(errnoText(errno))") }
            try create(Self.keyFile, bytes)
            return
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            throw Failure("\(path(Self.keyFile)) is not a file")
        }
        try writeAll(fd, bytes, shown: Self.keyFile)
        if st.st_size > bytes.count { _ = ftruncate(fd, off_t(bytes.count)) }
        guard fdatasync(fd) == 0 else { throw Failure("cannot sync \(path(Self.keyFile)): \(errnoText(errno))") }
    }

    static func encodeState(_ s: KeyState) -> [UInt8] {
        Array("\(keyMagic) epoch=\(pad(Int64(clamping: s.key.epoch))) sealed=\(pad(s.sealed)) created=\(pad(s.createdAt)) shown=\(pad(s.shownAt ?? 0)) fingerprint=\(s.fingerprint) key=\(Hex.string(s.key.bytes))\n".utf8)
    }

    static func decodeState(_ bytes: [UInt8]) -> KeyState? {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.hasPrefix(keyMagic + " "), text.hasSuffix("\n") else { return nil }
        var fields: [String: String] = [:]
        for part in text.dropFirst(keyMagic.count + 1).dropLast().split(separator: " ") {
            let kv = part.split(separator: "=", maxSplits: 1)
            guard kv.count == 2 else { return nil }
            fields[String(kv[0])] = String(kv[1])
        }
        guard let epoch = fields["epoch"].flatMap(UInt64.init), let sealed = fields["sealed"].flatMap(Int64.init), sealed >= 0,
              let created = fields["created"].flatMap(Int64.init), let shown = fields["shown"].flatMap(Int64.init),
              let fingerprint = fields["fingerprint"], fingerprint.utf8.count == 32,
              let key = fields["key"].flatMap(Hex.bytes), key.count == SealingKey.size else { return nil }
        return KeyState(key: SealingKey(epoch: epoch, bytes: key), sealed: sealed, createdAt: created, shownAt: shown > 0 ? shown : nil,
                        fingerprint: fingerprint)
    }

    /// 20 digits: every state line is as long as the last, so an overwrite covers it.
    static func pad(_ n: Int64) -> String {
        let digits = String(max(0, n))
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits
    }

    /// How `start` found the sealing key.
    package enum Opening: Sendable, Equatable {
        case kept
        /// The first start of the trail: a verification key was made, waiting to be shown.
        case made
        /// The key file was gone while seals exist: sealing goes on under a new key.
        case remade
    }

    /// The sealing key at the trail's start (`position`: where the trail stands). Made the
    /// first time (the verification key waits in its file to be shown; epoch 0 then seals
    /// the trail as it stands, by the caller); taken back from the waiting verification
    /// key if a stop came before the key file was written; moved on if a stop came between
    /// a seal and the key's step.
    package func start(at position: AuditMark, now: Int64) throws(Failure) -> (state: KeyState, opening: Opening) {
        let last = try entries().last(where: { $0.seal != nil })?.seal
        var state: KeyState
        var opening = Opening.kept
        if let kept = try loadState() {
            state = kept
        } else {
            if let pending = try loadPending(), last == nil {
                state = KeyState(key: pending.key.first, sealed: position.seq, createdAt: pending.createdAt, shownAt: nil,
                                 fingerprint: pending.key.fingerprint)
            } else {
                let key = VerificationKey.generate()
                try savePending(key, createdAt: now)
                state = KeyState(key: key.first, sealed: position.seq, createdAt: now, shownAt: nil, fingerprint: key.fingerprint)
                opening = last == nil ? .made : .remade
            }
            try saveState(state)
        }
        if let last, last.key == state.fingerprint, last.epoch == state.key.epoch {
            state.key = state.key.next()
            state.sealed = last.seq
            try saveState(state)
        }
        return (state, opening)
    }

    // MARK: the verification key, until it is shown

    /// The verification key of `state`, while it waits to be shown.
    package func waiting(for state: KeyState) -> VerificationKey? {
        guard let pending = try? loadPending(), pending.key.fingerprint == state.fingerprint else { return nil }
        return pending.key
    }

    /// Root was shown it: when is kept, the key is overwritten and unlinked.
    package func forgetVerificationKey(_ state: KeyState, at: Int64) throws(Failure) -> KeyState {
        var shown = state
        shown.shownAt = at
        try saveState(shown)
        try erasePending()
        return shown
    }

    package func loadPending() throws(Failure) -> (key: VerificationKey, createdAt: Int64)? {
        guard let bytes = try read(Self.pendingFile, limit: 4096) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        let parts = text.dropLast().split(separator: " ")
        guard text.hasPrefix(Self.pendingMagic + " "), text.hasSuffix("\n"), parts.count == 4,
              parts[2].hasPrefix("created="), let created = Int64(parts[2].dropFirst(8)),
              parts[3].hasPrefix("key="), let key = Hex.bytes(String(parts[3].dropFirst(4))), key.count == SealingKey.size else {
            throw Failure("\(path(Self.pendingFile)) is not the verification key file photolalad writes")
        }
        return (VerificationKey(bytes: key), created)
    }

    package func savePending(_ key: VerificationKey, createdAt: Int64) throws(Failure) {
        try create(Self.pendingFile, Array("\(Self.pendingMagic) created=\(Self.pad(createdAt)) key=\(Hex.string(key.bytes))\n".utf8))
    }

    /// Once root was shown it: overwritten, synced, unlinked.
    package func erasePending() throws(Failure) {
        do throws(Shred.Failure) {
            try Shred.remove(Self.pendingFile, in: directory)
            try Shred.remove(Self.pendingFile + ".tmp", in: directory)
        } catch {
            throw Failure(error.message)
        }
    }

    // MARK: the seals

    /// Appends one seal and syncs it: it is on disk before the key moves on.
    package func append(_ seal: AuditSeal) throws(Failure) {
        let fd = open(path(Self.sealsFile), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure("cannot open \(path(Self.sealsFile)): \(errnoText(errno))") }
        defer { close(fd) }
        _ = fchmod(fd, 0o600)
        var st = stat()
        let existed = fstat(fd, &st) == 0 && st.st_size > 0
        // A line cut short by a crash would glue itself to this one: it starts on its own.
        var bytes = Array((seal.line + "\n").utf8)
        if existed, let lastByte = try? lastByte(fd, size: st.st_size), lastByte != UInt8(ascii: "\n") { bytes.insert(UInt8(ascii: "\n"), at: 0) }
        try writeAll(fd, bytes, shown: Self.sealsFile)
        guard fdatasync(fd) == 0 else { throw Failure("cannot sync \(path(Self.sealsFile)): \(errnoText(errno))") }
        if !existed { syncDirectory() }
    }

    /// Every line of `audit.seals` (empty when missing).
    package func entries() throws(Failure) -> [AuditSealCheck.Entry] {
        guard let bytes = try read(Self.sealsFile, limit: Self.maxSealsSize) else { return [] }
        return Self.entries(of: bytes)
    }

    package static func entries(of bytes: [UInt8]) -> [AuditSealCheck.Entry] {
        AuditChain.lines(of: bytes).enumerated().compactMap { i, line in
            // An empty line (a crash's newline before the next seal) is nothing.
            line.isEmpty ? nil : AuditSealCheck.Entry(seal: AuditSeal.parse(line), line: i + 1)
        }
    }

    /// Raw, for the command that checks it (nil when missing).
    package func sealsBytes() throws(Failure) -> [UInt8]? {
        try read(Self.sealsFile, limit: Self.maxSealsSize)
    }

    /// Drops the seals of records before `head` (rotation dropped them): written to a
    /// temporary file, synced, renamed over.
    package func prune(before head: Int64) throws(Failure) {
        guard let bytes = try read(Self.sealsFile, limit: Self.maxSealsSize) else { return }
        let lines = AuditChain.lines(of: bytes)
        let kept = lines.filter { line in AuditSeal.parse(line).map { $0.seq >= head } ?? true }
        guard kept.count < lines.count else { return }
        try create(Self.sealsFile, kept.flatMap { Array($0) + [UInt8(ascii: "\n")] })
    }

    // MARK: files

    private func path(_ name: String) -> String { directory + "/" + name }

    /// A new version of `name`: `name.tmp` (created exclusively, 0600, never through a
    /// link), synced, renamed over, the folder synced.
    private func create(_ name: String, _ bytes: [UInt8]) throws(Failure) {
        let tmp = path(name + ".tmp")
        unlink(tmp)
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure("cannot write in \(directory): \(errnoText(errno))") }
        var failure: Failure?
        do throws(Failure) {
            try writeAll(fd, bytes, shown: name)
        } catch {
            failure = error
        }
        if failure == nil && fsync(fd) != 0 { failure = Failure("cannot sync \(tmp): \(errnoText(errno))") }
        close(fd)
        if let failure {
            unlink(tmp)
            throw failure
        }
        guard rename(tmp, path(name)) == 0 else {
            let why = errnoText(errno)
            unlink(tmp)
            throw Failure("cannot write \(path(name)): \(why)")
        }
        syncDirectory()
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8], shown: String) throws(Failure) {
        var done = 0
        let append = fcntl(fd, F_GETFL) & O_APPEND != 0
        while done < bytes.count {
            let n = retryingInterrupts {
                bytes.withUnsafeBytes { raw in
                    append ? write(fd, raw.baseAddress! + done, raw.count - done) : pwrite(fd, raw.baseAddress! + done, raw.count - done, off_t(done))
                }
            }
            guard n > 0 else { throw Failure("cannot write \(path(shown)): \(errnoText(errno))") }
            done += n
        }
    }

    private func lastByte(_ fd: Int32, size: off_t) throws -> UInt8 {
        var byte: UInt8 = 0
        guard pread(fd, &byte, 1, size - 1) == 1 else { throw Failure("unreadable") }
        return byte
    }

    /// The file, or nil when it does not exist; at most `limit` bytes.
    private func read(_ name: String, limit: Int) throws(Failure) -> [UInt8]? {
        let fd = open(path(name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw Failure("cannot read \(path(name)): \(errnoText(errno))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { throw Failure("\(path(name)) is not a file") }
        let count = min(Int(st.st_size), limit)
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = retryingInterrupts { bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(done)) } }
            if n <= 0 { break }
            done += n
        }
        return Array(bytes.prefix(done))
    }

    private func syncDirectory() {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }
}
