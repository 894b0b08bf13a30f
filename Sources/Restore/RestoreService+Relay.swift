import Account
import Bucket
import Control
import Foundation
import NIOCore
import Synchronization

/// Relaying one object to `photolalactl restore`: small ones in one streamed GET (resumed
/// from where it broke off if the connection drops), big ones as ranges read several at
/// a time and sent in order. Whatever goes wrong before the first byte is answered as an
/// error the command can show; after it, the body is cut short, which the command sees.
extension RestoreService {
    /// `GET /v1/restore/object?md5=M&size=N` (N: the size the manifest gives).
    package func object(md5: String, expectedSize: Int64?) async -> ControlResponse {
        guard Self.isMD5(md5) else { return .error(400, "bad_request", "md5 must be 32 lowercase hex digits") }
        let reached = await access()
        guard case .ready(let grant, let userId) = reached else {
            if case .unavailable(let response) = reached { return response }
            return .error(503, "unavailable", "the bucket cannot be reached now")
        }
        let key = "photos/\(userId)/\(md5).dat"
        let ranged = RangePlan(size: expectedSize ?? 0, threshold: options.rangeThreshold, rangeSize: options.rangeSize).isRanged
        return .stream { writer in
            if ranged {
                await self.relayRanges(key: key, userId: userId, grant: grant, writer: writer)
            } else {
                await self.relayWhole(key: key, userId: userId, grant: grant, writer: writer)
            }
        }
    }

    /// What a relay has sent, shared with the S3 client's callbacks.
    final class Relayed: Sendable {
        private let state = Mutex<(begun: Bool, total: Int64, sent: Int64)>((false, 0, 0))
        var begun: Bool { state.withLock { $0.begun } }
        var sent: Int64 { state.withLock { $0.sent } }
        var total: Int64 { state.withLock { $0.total } }
        func begin(_ total: Int64) { state.withLock { $0 = (true, total, $0.sent) } }
        func add(_ n: Int) { state.withLock { $0.sent += Int64(n) } }
    }

    func relayWhole(key: String, userId: String, grant: STSGrant, writer: ControlStreamWriter) async {
        let relayed = Relayed()
        var grant = grant
        var attempt = 0
        var refreshed = false
        let bandwidth = self.bandwidth
        let meter = self.meter
        while true {
            let outcome: S3Error?
            do throws(S3Error) {
                let (client, credentials) = try client(grant, prefix: "photos/\(userId)/")
                let from = relayed.sent
                let range: ClosedRange<Int64>? = relayed.begun && from > 0 ? from...(relayed.total - 1) : nil
                _ = try await client.getObject(key: key, range: range, expectedBytes: relayed.total - from, credentials: credentials, onHead: { head in
                    guard !relayed.begun else { return }
                    relayed.begin(head.objectSize)
                    try await writer.begin(contentType: "application/octet-stream", contentLength: head.objectSize)
                }, consume: { buffer in
                    await bandwidth.take(buffer.readableBytes)
                    try await writer.write(buffer)
                    relayed.add(buffer.readableBytes)
                    meter.add(Int64(buffer.readableBytes))
                })
                outcome = nil
            } catch {
                outcome = error
            }
            guard let error = outcome, !(relayed.begun && relayed.sent >= relayed.total) else {
                if !relayed.begun { try? await writer.begin(contentType: "application/octet-stream", contentLength: 0) }
                try? await writer.finish()
                return
            }
            if error.kind == .localFile { return }   // the command went away
            if !relayed.begun, let answer = Self.refusal(error, key: key) {
                await writer.respond(answer)
                return
            }
            guard await shouldRetry(error, grant: grant, attempt: &attempt, refreshed: &refreshed) else {
                if !relayed.begun { await writer.respond(.error(502, "storage_error", "could not read \(key): \(error)")) }
                logger.warning("an object could not be relayed whole", metadata: ["key": "\(key)", "error": "\(error)"])
                return
            }
            if refreshed, let fresh = try? await account.credentials() { grant = fresh }
        }
    }

    func relayRanges(key: String, userId: String, grant: STSGrant, writer: ControlStreamWriter) async {
        // The first range says how big the object is; then the rest, `parallelRanges` ahead.
        // A range's bytes count against the shared budget from before it is fetched until
        // they are written to the command.
        var held: [Int: Int64] = [0: await budget.acquire(options.rangeSize)]
        var tasks: [Int: Task<Result<(S3Client.ObjectHead, ByteBuffer), S3Error>, Never>] = [:]
        defer {
            for task in tasks.values { task.cancel() }
            let budget = self.budget
            let total = held.values.reduce(0, +)
            Task { await budget.release(total) }
        }
        let first = await fetchRange(key: key, userId: userId, range: 0...(options.rangeSize - 1), grant: grant)
        guard case .success(let (head, firstBytes)) = first else {
            if case .failure(let error) = first {
                await writer.respond(Self.refusal(error, key: key) ?? .error(502, "storage_error", "could not read \(key): \(error)"))
            }
            return
        }
        let plan = RangePlan(size: head.objectSize, threshold: 0, rangeSize: options.rangeSize)
        var next = 1
        do {
            try await writer.begin(contentType: "application/octet-stream", contentLength: head.objectSize)
            try await send(firstBytes, writer)
            await budget.release(held.removeValue(forKey: 0) ?? 0)
            for i in 1..<max(1, plan.ranges.count) {
                while next < plan.ranges.count && next < i + options.parallelRanges {
                    let range = plan.ranges[next]
                    held[next] = await budget.acquire(Int64(range.count))
                    tasks[next] = Task { await self.fetchRange(key: key, userId: userId, range: range, grant: grant) }
                    next += 1
                }
                guard let task = tasks.removeValue(forKey: i) else { break }
                guard case .success(let (_, bytes)) = await task.value else {
                    logger.warning("a range of an object could not be read; the command sees it cut short", metadata: ["key": "\(key)"])
                    return
                }
                try await send(bytes, writer)
                await budget.release(held.removeValue(forKey: i) ?? 0)
            }
            try await writer.finish()
        } catch {
            logger.info("a ranged relay stopped: \(error)", metadata: ["key": "\(key)"])
        }
    }

    /// One range into memory, retried under the uploads' rule.
    func fetchRange(key: String, userId: String, range: ClosedRange<Int64>, grant: STSGrant) async -> Result<(S3Client.ObjectHead, ByteBuffer), S3Error> {
        var grant = grant
        var attempt = 0
        var refreshed = false
        let meter = self.meter
        while true {
            let collected = Mutex(ByteBuffer())
            do {
                let (client, credentials) = try client(grant, prefix: "photos/\(userId)/")
                let head = try await client.getObject(key: key, range: range, credentials: credentials) { buffer in
                    var b = buffer
                    collected.withLock { _ = $0.writeBuffer(&b) }
                    meter.add(Int64(buffer.readableBytes))
                }
                return .success((head, collected.withLock { $0 }))
            } catch {
                if Task.isCancelled { return .failure(error) }
                guard await shouldRetry(error, grant: grant, attempt: &attempt, refreshed: &refreshed) else { return .failure(error) }
                if refreshed, let fresh = try? await account.credentials() { grant = fresh }
            }
        }
    }

    private func send(_ bytes: ByteBuffer, _ writer: ControlStreamWriter) async throws {
        var rest = bytes
        while rest.readableBytes > 0, let piece = rest.readSlice(length: min(rest.readableBytes, 256 << 10)) {
            await bandwidth.take(piece.readableBytes)
            try await writer.write(piece)
        }
    }

    /// An answer the command can act on, for failures before the first byte.
    static func refusal(_ error: S3Error, key: String) -> ControlResponse? {
        if error.code == "InvalidObjectState" {
            return .error(409, "archived", "\(key) is in an archive class and must be asked back first")
        }
        if error.kind == .notFound {
            return .error(404, "missing", "\(key) is not in the bucket")
        }
        return nil
    }
}
