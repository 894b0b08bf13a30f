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
                "photolalad is not running (no daemon at \(path)); start it with: systemctl start photolalad"
            case let .permissionDenied(hint): hint
            case let .protocolError(why): "unexpected answer from photolalad: \(why)"
            case let .timedOut(path): "photolalad at \(path) did not answer in time; check: systemctl status photolalad"
            }
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

    static func parse(_ response: [UInt8]) throws(Failure) -> (Int, [UInt8]) {
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
}
