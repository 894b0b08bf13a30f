#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PhotolalaCore

/// The CLI's side of the control socket: one blocking request with timeouts. The CLI
/// never opens the database; everything it shows comes through here.
package struct ControlClient: Sendable {
    package enum Failure: Error, CustomStringConvertible {
        /// No daemon: the socket is missing or refuses connections.
        case notRunning(path: String)
        /// The kernel or the daemon said no; `hint` says which group to join.
        case permissionDenied(hint: String)
        case protocolError(String)
        case timedOut(path: String)

        package var description: String {
            switch self {
            case let .notRunning(path):
                "photolalad is not running (no daemon at \(path)); start it with: systemctl start \(Self.unit(path))"
            case let .permissionDenied(hint): hint
            case let .protocolError(why): "unexpected answer from photolalad: \(why)"
            case let .timedOut(path): "photolalad at \(path) did not answer in time; check: systemctl status \(Self.unit(path))"
            }
        }

        /// The unit that serves a socket: `photolalad@NAME` for an instance's
        /// /run/photolala/NAME.sock (config.md "Instances"), else `photolalad`.
        static func unit(_ socketPath: String) -> String {
            let prefix = "/run/photolala/", suffix = ".sock"
            guard socketPath.hasPrefix(prefix), socketPath.hasSuffix(suffix) else { return "photolalad" }
            let name = String(socketPath.dropFirst(prefix.count).dropLast(suffix.count))
            guard let instance = Instance(name) else { return "photolalad" }
            return "photolalad@\(instance.name)"
        }
    }

    package let socketPath: String
    package let groupHint: String
    package var timeout: TimeInterval

    package init(socketPath: String, groupHint: String = "photolala", timeout: TimeInterval = 30) {
        self.socketPath = socketPath
        self.groupHint = groupHint
        self.timeout = timeout
    }

    /// Sends one request and returns (HTTP status, body). A busy daemon (connection cap
    /// reached under a flood) is retried briefly.
    package func send(_ route: ControlRoute, query: [String: String] = [:], body: [UInt8] = []) throws(Failure) -> (Int, [UInt8]) {
        var attempt = 0
        while true {
            let (status, reply) = try sendOnce(route, query: query, body: body)
            if status == 503, attempt < 20 {
                attempt += 1
                usleep(UInt32(min(100_000 * attempt, 500_000)))
                continue
            }
            return (status, reply)
        }
    }

    /// Decodes a 2xx JSON answer; a 403 becomes `permissionDenied` with the daemon's words.
    package func call<T: Decodable>(_ route: ControlRoute, query: [String: String] = [:], body: [UInt8] = [], as type: T.Type) throws(Failure) -> T {
        let (status, reply) = try send(route, query: query, body: body)
        if status == 403 {
            let message = (try? ControlJSON.decode(ControlReply.self, from: reply))?.message
            throw .permissionDenied(hint: message ?? "permission denied: join the group '\(groupHint)'")
        }
        do {
            return try ControlJSON.decode(T.self, from: reply)
        } catch {
            if let r = try? ControlJSON.decode(ControlReply.self, from: reply) {
                throw .protocolError(r.message)
            }
            throw .protocolError("HTTP \(status)")
        }
    }

    private func sendOnce(_ route: ControlRoute, query: [String: String], body: [UInt8]) throws(Failure) -> (Int, [UInt8]) {
        let fd = try connectAndSend(route, query: query, body: body, timeout: timeout)
        defer { close(fd) }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = retryingInterrupts { read(fd, &chunk, chunk.count) }
            if n == 0 { break }
            if n < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK { throw .timedOut(path: socketPath) }
                if response.isEmpty { throw .notRunning(path: socketPath) }
                break
            }
            response += chunk[0..<n]
            if response.count > 64 << 20 { throw .protocolError("answer too large") }
        }
        return try Self.parse(response)
    }

    /// Connects and sends the whole request; returns the socket, for the caller to read
    /// the answer from and close.
    func connectAndSend(_ route: ControlRoute, query: [String: String], body: [UInt8], timeout: TimeInterval) throws(Failure) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .protocolError("socket(): \(String(cString: strerror(errno)))") }
        var ok = false
        defer { if !ok { close(fd) } }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        guard var addr = UnixAddress(socketPath) else { throw .protocolError("socket path too long: \(socketPath)") }
        if addr.connect(fd) != 0 {
            switch errno {
            case EACCES, EPERM:
                let group = Self.groupOwning(socketPath) ?? groupHint
                throw .permissionDenied(hint: "permission denied on \(socketPath): join the group '\(group)' to use photolalactl (sudo usermod -aG \(group) $USER, then log in again), or use sudo")
            default:
                throw .notRunning(path: socketPath)
            }
        }
        var target = route.path
        if !query.isEmpty {
            let allowed = CharacterSet.urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+"))
            target += "?" + query.sorted { $0.key < $1.key }.map {
                "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")"
            }.joined(separator: "&")
        }
        var request = Array("\(route.method) \(target) HTTP/1.1\r\nHost: photolalad\r\nContent-Length: \(body.count)\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n".utf8)
        request += body
        var sent = 0
        while sent < request.count {
            let n = retryingInterrupts { request[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
            if n <= 0 {
                throw errno == EAGAIN ? .timedOut(path: socketPath) : .notRunning(path: socketPath)
            }
            sent += n
        }
        ok = true
        return fd
    }

    /// The group the socket file belongs to: the one to join, whatever the config says.
    static func groupOwning(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        var grp = group()
        var result: UnsafeMutablePointer<group>? = nil
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getgrgid_r(st.st_gid, &grp, &buffer, buffer.count, &result) == 0, result != nil, let name = grp.gr_name else { return nil }
        return String(cString: name)
    }

    package static func parse(_ response: [UInt8]) throws(Failure) -> (Int, [UInt8]) {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = response.indices.first(where: { i in i + 4 <= response.count && Array(response[i..<(i + 4)]) == separator }) else {
            throw .protocolError("no HTTP header in the answer")
        }
        let head = String(decoding: response[..<end], as: UTF8.self)
        let statusLine = head.split(separator: "\r\n").first ?? ""
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw .protocolError("bad status line") }
        return (status, Array(response[(end + 4)...]))
    }

    // MARK: - Streamed answers
    // Reading a streamed answer (an object being restored, a manifest) as it arrives,
    // instead of whole: the body goes to `consume` a read at a time.

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
