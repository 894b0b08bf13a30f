/// De-chunks an HTTP/1.1 body (RFC 9112 section 7.1) fed in arbitrary pieces; a plain
/// body passes through. Pure, so the pieces' boundaries can be tested anywhere.
package struct HTTPBodyDecoder: Sendable {
    enum State: Sendable { case size, sizeLF, data(Int), dataCR, dataLF, trailer, done }

    package let chunked: Bool
    private var state: State = .size
    private var sizeText: [UInt8] = []
    private var trailerLine = 0

    package init(chunked: Bool) {
        self.chunked = chunked
    }

    /// The last chunk and its trailer were read.
    package var finished: Bool {
        if case .done = state { return true }
        return false
    }

    package enum DecodeError: Error { case badChunk }

    package mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard chunked else {
            if !bytes.isEmpty { try emit(bytes) }
            return
        }
        var i = 0
        while i < bytes.count {
            switch state {
            case .size:
                let b = bytes[i]
                i += 1
                if b == 13 {
                    state = .sizeLF
                } else {
                    sizeText.append(b)
                    if sizeText.count > 64 { throw DecodeError.badChunk }
                }
            case .sizeLF:
                guard bytes[i] == 10 else { throw DecodeError.badChunk }
                i += 1
                let text = String(decoding: sizeText, as: UTF8.self).split(separator: ";").first.map(String.init) ?? ""
                guard let size = Int(text.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0 else { throw DecodeError.badChunk }
                sizeText = []
                state = size == 0 ? .trailer : .data(size)
                trailerLine = 0
            case .data(let left):
                let take = min(left, bytes.count - i)
                try emit(UnsafeRawBufferPointer(rebasing: bytes[i..<(i + take)]))
                i += take
                state = left - take == 0 ? .dataCR : .data(left - take)
            case .dataCR:
                guard bytes[i] == 13 else { throw DecodeError.badChunk }
                i += 1
                state = .dataLF
            case .dataLF:
                guard bytes[i] == 10 else { throw DecodeError.badChunk }
                i += 1
                state = .size
            case .trailer:
                // Trailer lines until an empty one: count the bytes of the current line.
                let b = bytes[i]
                i += 1
                if b == 10 {
                    if trailerLine == 0 { state = .done } else { trailerLine = 0 }
                } else if b != 13 {
                    trailerLine += 1
                }
            case .done:
                return
            }
        }
    }
}
