import NIOCore

/// Refuses a request whose head grows past the limit before the HTTP parser buffers it.
final class HeaderSizeGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private let limit: Int
    private var seen = 0
    private var headEnded = false
    private var tail: [UInt8] = []

    init(limit: Int) { self.limit = limit }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if !headEnded {
            let bytes = buffer.readableBytesView
            // Look for the blank line that ends the head, across reads.
            let window = tail + bytes
            if window.count >= 4 {
                for i in 0...(window.count - 4) where window[i] == 13 && window[i + 1] == 10 && window[i + 2] == 13 && window[i + 3] == 10 {
                    headEnded = true
                    break
                }
            }
            tail = Array(window.suffix(3))
            seen += bytes.count
            if !headEnded && seen > limit {
                let body = Array("{\"error\":\"request_too_large\",\"message\":\"request header too large\",\"ok\":false}".utf8)
                var out = context.channel.allocator.buffer(capacity: 200)
                out.writeString("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n")
                out.writeBytes(body)
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(NIOAny(out)).whenComplete { _ in bound.value.close(promise: nil) }
                seen = Int.min / 2  // swallow everything else
                return
            }
            if seen < 0 { return }
        }
        context.fireChannelRead(data)
    }
}
