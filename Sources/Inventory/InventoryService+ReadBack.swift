import Bucket
import Digests
import Foundation
import NIOCore
import PhotolalaCore
import Queue
import Synchronization

/// `verify --deep`: objects read back, streamed through an MD5 a buffer at a time (memory
/// stays flat whatever their size), the digest compared with the key. The only check that
/// holds whatever the bucket does to ETags (SSE-KMS, multipart uploads by other tools).
extension InventoryService {
    enum ReadBack: Sendable, Equatable {
        case same
        case different
        case missing
        case unreadable(String)
    }

    /// The share `percent` of the uploaded objects (at least one), those never read back
    /// first, `readBackConcurrency` at a time.
    func readBack(userId: String, percent: Double, verifyStartedAt: Date, into result: inout DaemonStatus.Verify) async {
        let prefix = Self.photosPrefix(userId)
        let total = (try? database.uploadedObjectCount()) ?? 0
        let count = total == 0 ? 0 : max(1, Int((Double(total) * percent / 100).rounded(.up)))
        guard let picks = try? database.objectsToReadBack(count: count, keyPrefix: prefix, uploadedBefore: verifyStartedAt), !picks.isEmpty else { return }
        verify.phase = .readingBack
        verify.done = 0
        verify.total = picks.count
        statusChanges.changed()
        var unreadable = 0
        var lastProblem: String?
        var different: [String] = []
        var missing: [String] = []
        await withTaskGroup(of: (String, ReadBack).self) { group in
            var next = picks.makeIterator()
            func start() -> Bool {
                guard let pick = next.next() else { return false }
                group.addTask { (pick.md5, await self.readBack(md5: pick.md5, size: pick.size, prefix: prefix)) }
                return true
            }
            for _ in 0..<options.readBackConcurrency where start() {}
            while let (md5, outcome) = await group.next() {
                switch outcome {
                case .same:
                    result.readBack += 1
                    try? database.markReadBack(md5: md5)
                case .different:
                    result.readBack += 1
                    result.readBackWrong += 1
                    different.append(md5)
                    logger.warning("verify: the bytes read back are not the ones backed up", metadata: ["key": "\(prefix)\(md5).dat"])
                case .missing:
                    result.missing += 1
                    missing.append(md5)
                    logger.warning("verify: not in the bucket", metadata: ["key": "\(prefix)\(md5).dat"])
                case .unreadable(let why):
                    unreadable += 1
                    lastProblem = why
                }
                verify.done += 1
                verify.result = result
                statusChanges.changed()
                _ = start()
            }
        }
        result.mismatched = result.wrongSize + result.wrongETag + result.readBackWrong
        result.requeued += (try? database.requeue(different, overwrite: true, reason: "read back by verify, the bucket held other bytes: sending it again")) ?? 0
        result.requeued += (try? database.requeue(missing, overwrite: false, reason: "its object was not in the bucket any more: sending it again")) ?? 0
        if let lastProblem {
            result.lastError = "\(unreadable) object\(unreadable == 1 ? "" : "s") could not be read back (last: \(lastProblem))"
        }
    }

    /// One object, streamed through an MD5.
    func readBack(md5: String, size: Int64, prefix: String) async -> ReadBack {
        let key = prefix + md5 + ".dat"
        let digest = Mutex(MD5())
        let received = Mutex<Int64>(0)
        do {
            _ = try await request(prefix: prefix) { client, credentials throws(S3Error) in
                // A retry reads from the start again.
                digest.withLock { $0 = MD5() }
                received.withLock { $0 = 0 }
                return try await client.getObject(key: key, expectedBytes: size, credentials: credentials) { buffer in
                    digest.withLock { md5 in buffer.withUnsafeReadableBytes { md5.update($0) } }
                    received.withLock { $0 += Int64(buffer.readableBytes) }
                }
            }
        } catch let error as S3Error where error.kind == .notFound {
            return .missing
        } catch {
            return .unreadable("\(key): \(error)")
        }
        let hex = Hex.string(digest.withLock { $0.finalize() })
        return hex == md5 && received.withLock({ $0 }) == size ? .same : .different
    }
}
