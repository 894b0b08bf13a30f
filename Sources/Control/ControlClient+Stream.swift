#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PhotolalaCore

/// Reading a streamed answer (an object being restored, a manifest) as it arrives,
/// instead of whole: the body goes to `consume` a read at a time.
extension ControlClient {
    package struct StreamAnswer: Sendable, Equatable {
        package var status: Int
        /// The declared length, nil for a chunked body.
        package var contentLength: Int64?
        /// Body bytes handed to `consume`.
        package var received: Int64
        /// The body arrived whole (its declared length, or its last chunk).
        package var complete: Bool
        /// A non-2xx answer's body (JSON), which is not streamed.
        package var errorBody: [UInt8]

        /// The daemon's words for a refusal.
        package var errorMessage: String? {
            (try? ControlJSON.decode(ControlReply.self, from: errorBody))?.message
        }
    }

    /// Sends one request; a 2xx answer's body goes to `consume` (de-chunked), anything else
    /// comes back in `errorBody`. A 403 becomes `permissionDenied` with the daemon's words.
    package func stream(_ route: ControlRoute, query: [String: String] = [:], body: [UInt8] = [], timeout: TimeInterval? = nil,
                       consume: (UnsafeRawBufferPointer) throws -> Void) throws -> StreamAnswer {
        let fd = try connectAndSend(route, query: query, body: body, timeout: timeout ?? self.timeout)
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        var head: [UInt8] = []
        var answer: StreamAnswer?
        var decoder = HTTPBodyDecoder(chunked: false)
        func readSome() throws(Failure) -> Int {
            let n = retryingInterrupts { read(fd, &buffer, buffer.count) }
            if n >= 0 { return n }
            if errno == EAGAIN || errno == EWOULDBLOCK { throw .timedOut(path: socketPath) }
            return 0
        }
        while true {
            let n = try readSome()
            if n == 0 { break }
            var start = 0
            if answer == nil {
                head += buffer[0..<n]
                guard let end = Self.headEnd(head) else {
                    if head.count > 64 << 10 { throw Failure.protocolError("answer head too large") }
                    continue
                }
                let parsed = try Self.parseHead(Array(head[..<end]))
                answer = StreamAnswer(status: parsed.status, contentLength: parsed.length, received: 0, complete: false, errorBody: [])
                decoder = HTTPBodyDecoder(chunked: parsed.chunked)
                let rest = Array(head[(end + 4)...])
                head = []
                if !(200..<300).contains(parsed.status) {
                    answer?.errorBody = rest
                } else if !rest.isEmpty {
                    try rest.withUnsafeBytes { try feed(&decoder, $0, &answer!, consume) }
                }
                start = n
            }
            guard start < n else { continue }
            if !(200..<300).contains(answer!.status) {
                answer!.errorBody += buffer[start..<n]
                if answer!.errorBody.count > 1 << 20 { break }
                continue
            }
            try buffer.withUnsafeBytes { raw in
                try feed(&decoder, UnsafeRawBufferPointer(rebasing: raw[start..<n]), &answer!, consume)
            }
            if answer!.complete { break }
        }
        guard var result = answer else { throw Failure.notRunning(path: socketPath) }
        if result.status == 403 {
            throw Failure.permissionDenied(hint: result.errorMessage ?? "permission denied: join the group '\(groupHint)'")
        }
        if (200..<300).contains(result.status) {
            result.complete = decoder.chunked ? decoder.finished : (result.contentLength.map { result.received == $0 } ?? true)
        }
        return result
    }

    private func feed(_ decoder: inout HTTPBodyDecoder, _ bytes: UnsafeRawBufferPointer, _ answer: inout StreamAnswer,
                      _ consume: (UnsafeRawBufferPointer) throws -> Void) throws {
        var total: Int64 = 0
        try decoder.feed(bytes) { piece in
            total += Int64(piece.count)
            try consume(piece)
        }
        answer.received += total
        if !decoder.chunked, let length = answer.contentLength, answer.received >= length { answer.complete = true }
        if decoder.chunked && decoder.finished { answer.complete = true }
    }

    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i
        }
        return nil
    }

    static func parseHead(_ bytes: [UInt8]) throws(Failure) -> (status: Int, length: Int64?, chunked: Bool) {
        let lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n")
        let parts = (lines.first ?? "").split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw .protocolError("bad status line") }
        var length: Int64?
        var chunked = false
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if name == "content-length" { length = Int64(value) }
            if name == "transfer-encoding" && value.lowercased().contains("chunked") { chunked = true }
        }
        return (status, chunked ? nil : length, chunked)
    }
}
