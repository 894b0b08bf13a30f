import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// An answer whose body is produced while it is sent: an object read back from the bucket
/// for `photolalactl restore`, a manifest. The producer decides the head once it knows
/// the length (or answers with a plain JSON error instead) and writes the body a buffer
/// at a time; each write waits until the socket took the previous one, so memory stays
/// flat whatever the size, and a client that stops reading for `stallTimeout` is dropped.
package struct ControlStream: Sendable {
    package let produce: @Sendable (ControlStreamWriter) async -> Void

    package init(_ produce: @escaping @Sendable (ControlStreamWriter) async -> Void) {
        self.produce = produce
    }
}

package final class ControlStreamWriter: Sendable {
    enum Phase { case idle, streaming, done }

    package enum Failure: Error, CustomStringConvertible {
        case closed
        case misuse(String)
        package var description: String {
            switch self {
            case .closed: "the client went away"
            case .misuse(let why): why
            }
        }
    }

    let channel: any Channel
    let stallTimeout: TimeAmount
    private let phase = Mutex(Phase.idle)

    init(channel: any Channel, stallTimeout: TimeAmount) {
        self.channel = channel
        self.stallTimeout = stallTimeout
    }

    /// Answers with a plain (JSON) response instead of a stream; only before `begin`.
    package func respond(_ response: ControlResponse) async {
        guard phase.withLock({ p in defer { if p == .idle { p = .done } }; return p == .idle }) else { return }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: "\(response.body.count)")
        headers.add(name: "Connection", value: "close")
        let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
        channel.write(HTTPServerResponsePart.head(head), promise: nil)
        channel.write(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: response.body))), promise: nil)
        try? await send(.end(nil))
        try? await channel.close()
    }

    /// Sends the head. Without a length the body is sent chunked.
    package func begin(status: Int = 200, contentType: String, contentLength: Int64?) async throws {
        guard phase.withLock({ p in defer { if p == .idle { p = .streaming } }; return p == .idle }) else {
            throw Failure.misuse("the answer was already begun")
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        if let contentLength { headers.add(name: "Content-Length", value: "\(contentLength)") }
        headers.add(name: "Connection", value: "close")
        try? await channel.setOption(ChannelOptions.writeBufferWaterMark, value: .init(low: 128 << 10, high: 512 << 10)).get()
        try await send(.head(HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: headers)))
    }

    package func write(_ buffer: ByteBuffer) async throws {
        guard phase.withLock({ $0 == .streaming }) else { throw Failure.misuse("write before begin or after finish") }
        // Queued without waiting while the channel's buffer is under its high-water mark
        // (512 KiB): waiting for every write to reach the socket left the pipe idle
        // between buffers. Past the mark, the write is waited for, and the producer with it.
        let future = queue(.body(.byteBuffer(buffer)))
        if channel.isWritable { return }
        try await wait(future)
    }

    package func write(_ bytes: [UInt8]) async throws {
        try await write(ByteBuffer(bytes: bytes))
    }

    /// Ends the body; the connection closes (one request per connection).
    package func finish() async throws {
        guard phase.withLock({ p in defer { if p == .streaming { p = .done } }; return p == .streaming }) else { return }
        try await send(.end(nil))
        try? await channel.close()
    }

    /// After the producer returned: an answer never begun becomes an error, a body never
    /// finished is cut off by closing, so the client sees it short and never takes it for whole.
    func close() async {
        switch phase.withLock({ $0 }) {
        case .idle: await respond(.error(500, "internal", "the daemon produced no answer"))
        case .streaming:
            phase.withLock { $0 = .done }
            try? await channel.close()
        case .done: break
        }
    }

    private func send(_ part: HTTPServerResponsePart) async throws {
        try await wait(queue(part))
    }

    private func queue(_ part: HTTPServerResponsePart) -> EventLoopFuture<Void> {
        let promise = channel.eventLoop.makePromise(of: Void.self)
        channel.writeAndFlush(part, promise: promise)
        return promise.futureResult
    }

    private func wait(_ future: EventLoopFuture<Void>) async throws {
        let channel = self.channel
        let timer = channel.eventLoop.scheduleTask(in: stallTimeout) { channel.close(promise: nil) }
        defer { timer.cancel() }
        do {
            try await future.get()
        } catch {
            throw Failure.closed
        }
    }
}
