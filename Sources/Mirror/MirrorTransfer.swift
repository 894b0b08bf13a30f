#if canImport(Glibc)
import Glibc
#endif
import Bucket
import CLinux
import Digests
import Foundation
import ManifestFormat
import NIOCore
import PhotolalaCore
import Previews
import RestoreFiles
import Synchronization

/// One object's bytes from the bucket into its temporary file, bounded and checked
/// (mirror.md "Written like a restore"): the answer's size is compared with the listing's
/// before a byte is written (sizes before bytes), the body may not run past it, a dropped
/// connection resumes from the byte it stopped at, objects above `rangeThreshold` come as
/// ranges read `parallelRanges` at a time, each written at its own offset; then the file
/// is read back through `OpenFileLanes` (many files' MD5s at the cost of a fraction of a
/// stream each, as the restore does) and its MD5, and SHA-256 when a manifest records one,
/// compared with what the object must be. Nothing here names or renames a file.
package struct MirrorTransfer: Sendable {
    let session: BucketSession
    let prefix: String
    let budget: BucketBudget
    let bandwidth: TokenBucket
    /// Whether `download_limit` is set: without one, no buffer waits on the bucket's actor.
    let limited: Bool
    let lanes: OpenFileLanes
    var rangeThreshold: Int64 = 16 << 20
    var rangeSize: Int64 = 8 << 20
    var parallelRanges = 3

    package init(session: BucketSession, prefix: String, budget: BucketBudget, bandwidth: TokenBucket, limited: Bool = true,
                 lanes: OpenFileLanes) {
        self.session = session
        self.prefix = prefix
        self.budget = budget
        self.bandwidth = bandwidth
        self.limited = limited
        self.lanes = lanes
    }

    /// What came of one object.
    package enum Outcome: Error, Sendable {
        /// In its temporary file, checked: ready to be named and put in place.
        case fetched(Fetched)
        /// Not what its key, its listing or a manifest says it is: nothing under a final name.
        case refused(String)
        /// The account no longer holds it (404).
        case gone
        /// An archive class said no (403 InvalidObjectState): it must be asked back first.
        case archived
        /// The folder's filesystem is full (ENOSPC, EDQUOT).
        case diskFull(String)
        /// The folder cannot be written (permissions, read-only, gone).
        case folder(String)
        /// Anything else (S3 failing, the network): tried again later.
        case failed(String)
        /// Signed out, paused or stopping: nothing happened.
        case stopped
    }

    package struct Fetched: Sendable {
        package let incoming: IncomingFile
        package let digests: OpenFileDigests
        /// What the answer said the object is, for its extension.
        package let contentType: String?
        package let originalFormat: String?
        /// Its first bytes (up to what format sniffing reads).
        package let head: [UInt8]
    }

    /// What a download learnt besides the bytes (for the extension).
    package struct Downloaded: Sendable {
        package let contentType: String?
        package let originalFormat: String?
    }

    /// Reads `key` into `incoming` (new, empty), bounded by `size`: the bytes arrived, or
    /// what came of them instead (the temporary file then removed).
    package func download(key: String, size: Int64, into incoming: IncomingFile) async -> Result<Downloaded, Outcome> {
        let box = Box()
        let outcome: Outcome? = if size > rangeThreshold {
            await ranges(key: key, size: size, incoming: incoming, box: box)
        } else {
            await whole(key: key, size: size, incoming: incoming, box: box)
        }
        if let outcome {
            incoming.discard()
            return .failure(outcome)
        }
        do {
            try incoming.settle()
        } catch {
            incoming.discard()
            if let code = error.errno, code == ENOSPC || code == EDQUOT { return .failure(.diskFull(error.message)) }
            return .failure(.folder(error.message))
        }
        // Counted once an object is in, not per buffer (a counter costs a lookup each time).
        DaemonCounter.mirrorBytes.increment(by: incoming.written)
        let (type, format) = box.formats
        return .success(Downloaded(contentType: type, originalFormat: format))
    }

    /// The downloaded bytes read back and checked against `md5` and `sha256` (nil: no
    /// manifest records one): the copy is ready to be named and put in place, or refused
    /// (the temporary file then removed).
    package func verify(_ incoming: IncomingFile, md5: MD5Value, size: Int64, sha256: SHA256Value?,
                        downloaded: Downloaded) async -> Result<Fetched, Outcome> {
        guard incoming.written == size else {
            incoming.discard()
            return .failure(.refused("the answer held \(incoming.written) bytes where the listing says \(size)"))
        }
        let digests: OpenFileDigests
        switch await readBack(incoming, size: size, sha256: sha256 != nil) {
        case .success(let d): digests = d
        case .failure(let why):
            incoming.discard()
            return .failure(.failed("the copy could not be read back to check it: \(why)"))
        }
        guard let found = MD5Value(bytes: digests.md5), found == md5 else {
            incoming.discard()
            return .failure(.refused("its bytes have MD5 \(MD5Value(bytes: digests.md5)?.hex ?? "?"), not the one its key names"))
        }
        if let sha256 {
            let got = digests.sha256.flatMap { SHA256Value(bytes: $0) }
            guard got == sha256 else {
                incoming.discard()
                return .failure(.refused("its MD5 is right but its SHA-256 (\(got?.hex ?? "not taken")) is not the one a manifest of the account records: other bytes forged to the same MD5"))
            }
        }
        let head = Self.firstBytes(incoming.descriptor, min(size, Int64(PhotoFormat.sniffLength)))
        // The pages the read-back filled are of no more use (a copy is not read again
        // soon): given back now, the next copy's read-back reuses them while they are warm
        // instead of taking pages nobody touched lately, and the NAS keeps what it had
        // cached (docs/benchmarks.md, "The mirror's writes past the page cache").
        _ = posix_fadvise(incoming.descriptor, 0, 0, POSIX_FADV_DONTNEED)
        return .success(Fetched(incoming: incoming, digests: digests, contentType: downloaded.contentType,
                                originalFormat: downloaded.originalFormat, head: head))
    }

    /// Both, one after the other.
    package func fetch(key: String, md5: MD5Value, size: Int64, sha256: SHA256Value?, into incoming: IncomingFile) async -> Outcome {
        switch await download(key: key, size: size, into: incoming) {
        case .failure(let outcome): return outcome
        case .success(let d):
            switch await verify(incoming, md5: md5, size: size, sha256: sha256, downloaded: d) {
            case .success(let fetched): return .fetched(fetched)
            case .failure(let outcome): return outcome
            }
        }
    }

    // MARK: whole objects

    /// One GET; a transient failure resumes from the byte where it broke off (the session
    /// tries the operation again, which asks for the rest). nil: every byte arrived.
    private func whole(key: String, size: Int64, incoming: IncomingFile, box: Box) async -> Outcome? {
        guard size > 0 else { return nil }
        let bandwidth = self.bandwidth
        // Bytes written past the page cache are on their way to the disk already.
        let startWriteback = !incoming.writesDirect
        do throws(S3Error) {
            try await session.perform(under: prefix, budget: budget) { bucket throws(S3Error) in
                let from = incoming.written
                guard from < size else { return }
                let range: ClosedRange<Int64>? = from > 0 ? from...(size - 1) : nil
                _ = try await bucket.getObject(key: key, range: range, expectedBytes: size - from, onHead: { head in
                    // Sizes before bytes: an answer for another size than the listing's is
                    // refused before anything is written.
                    if head.objectSize != size {
                        throw box.refuse(head.objectSize < 0 ? "the answer did not say its size"
                                         : "the object is \(head.objectSize) bytes, the listing said \(size)")
                    }
                    box.note(head)
                }, consume: { buffer in
                    guard incoming.written + Int64(buffer.readableBytes) <= size else {
                        throw box.refuse("the body runs past the \(size) bytes the listing said")
                    }
                    if limited { await bandwidth.take(buffer.readableBytes) }
                    let before = incoming.written
                    try box.writing { try buffer.withUnsafeReadableBytes { raw in try incoming.append(raw) } }
                    // Every 4 MiB, the disk starts on what came: the fdatasync before the
                    // rename then waits for little.
                    if startWriteback && before >> 22 != incoming.written >> 22 {
                        let start = ((incoming.written >> 22) << 22) - (4 << 20)
                        _ = photolala_start_writeback(incoming.descriptor, max(0, start), 4 << 20)
                    }
                })
            }
        } catch {
            return outcome(of: error, box: box)
        }
        return nil
    }

    // MARK: big objects

    /// Consecutive ranges, `parallelRanges` at a time, each written at its offset (no
    /// range is held in memory beyond a buffer). nil: every range arrived.
    private func ranges(key: String, size: Int64, incoming: IncomingFile, box: Box) async -> Outcome? {
        var ranges: [ClosedRange<Int64>] = []
        var start: Int64 = 0
        while start < size {
            let end = min(size, start + rangeSize) - 1
            ranges.append(start...end)
            start = end + 1
        }
        let parallel = max(1, parallelRanges)
        return await withTaskGroup(of: Outcome?.self) { group in
            var next = 0
            func launch() {
                guard next < ranges.count else { return }
                let range = ranges[next]
                next += 1
                group.addTask { await self.range(range, key: key, size: size, incoming: incoming, box: box) }
            }
            for _ in 0..<min(parallel, ranges.count) { launch() }
            for await outcome in group {
                if let outcome {
                    group.cancelAll()
                    return outcome
                }
                launch()
            }
            return nil
        }
    }

    /// One range; a retry asks for the rest of it, from the byte where it broke off.
    private func range(_ range: ClosedRange<Int64>, key: String, size: Int64, incoming: IncomingFile, box: Box) async -> Outcome? {
        let bandwidth = self.bandwidth
        let at = Atomic<Int64>(range.lowerBound)
        do throws(S3Error) {
            try await session.perform(under: prefix, budget: budget) { bucket throws(S3Error) in
                let from = at.load(ordering: .relaxed)
                guard from <= range.upperBound else { return }
                let count = range.upperBound - from + 1
                _ = try await bucket.getObject(key: key, range: from...range.upperBound, expectedBytes: count, onHead: { head in
                    if head.objectSize != size {
                        throw box.refuse(head.objectSize < 0 ? "the answer did not say its size"
                                         : "the object is \(head.objectSize) bytes, the listing said \(size)")
                    }
                    if head.contentLength >= 0 && head.contentLength != count {
                        throw box.refuse("a range of \(count) bytes came as \(head.contentLength)")
                    }
                    box.note(head)
                }, consume: { buffer in
                    let offset = at.load(ordering: .relaxed)
                    guard offset + Int64(buffer.readableBytes) <= range.upperBound + 1 else {
                        throw box.refuse("a range ran past the bytes it asked for")
                    }
                    if limited { await bandwidth.take(buffer.readableBytes) }
                    try box.writing { try buffer.withUnsafeReadableBytes { raw in try incoming.write(raw, at: offset) } }
                    at.store(offset + Int64(buffer.readableBytes), ordering: .relaxed)
                })
                if at.load(ordering: .relaxed) <= range.upperBound {
                    throw S3Error(kind: .transient, code: "IncompleteBody", message: "a range ended early", operation: "GetObject", key: key)
                }
                _ = photolala_start_writeback(incoming.descriptor, range.lowerBound, Int64(range.count))
            }
        } catch {
            return outcome(of: error, box: box)
        }
        return nil
    }

    // MARK: what went wrong

    private func outcome(of error: S3Error, box: Box) -> Outcome {
        if let why = box.refusal { return .refused(why) }
        if let failure = box.writeFailure {
            if let code = failure.errno, code == ENOSPC || code == EDQUOT { return .diskFull(failure.message) }
            return .folder(failure.message)
        }
        if error.code == "InvalidObjectState" { return .archived }
        switch error.kind {
        case .notFound: return .gone
        case .cancelled, .unavailable: return .stopped
        default: return .failed(error.description)
        }
    }

    /// What the callbacks learnt, shared with the session's tries.
    final class Box: Sendable {
        private let state = Mutex<(refusal: String?, write: RestoreWriter.Failure?, type: String?, format: String?)>((nil, nil, nil, nil))

        /// Records why the object is refused; returns the error that stops the transfer.
        func refuse(_ why: String) -> any Error {
            state.withLock { if $0.refusal == nil { $0.refusal = why } }
            return Stop()
        }

        func note(_ head: S3Client.ObjectHead) {
            state.withLock {
                $0.type = head.contentType
                $0.format = head.originalFormat
            }
        }

        var refusal: String? { state.withLock { $0.refusal } }
        var writeFailure: RestoreWriter.Failure? { state.withLock { $0.write } }
        var formats: (String?, String?) { state.withLock { ($0.type, $0.format) } }

        /// Runs a write into the temporary file, keeping why it failed (a full disk pauses
        /// the mirror; it is not the object's fault).
        func writing(_ body: () throws -> Void) throws {
            do {
                try body()
            } catch let failure as RestoreWriter.Failure {
                state.withLock { if $0.write == nil { $0.write = failure } }
                throw failure
            }
        }

        struct Stop: Error {}
    }

    // MARK: reading back

    private func readBack(_ incoming: IncomingFile, size: Int64, sha256: Bool) async -> OpenFileLanes.Result {
        await Blocking.completion { done in
            lanes.submit(fd: incoming.descriptor, size: size, sha256: sha256, done: done)
        }
    }

    static func firstBytes(_ fd: Int32, _ count: Int64) -> [UInt8] {
        guard count > 0, fd >= 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: Int(count))
        let n = buffer.withUnsafeMutableBytes { raw in retryingInterrupts { pread(fd, raw.baseAddress, raw.count, 0) } }
        return n > 0 ? Array(buffer[0..<n]) : []
    }
}
