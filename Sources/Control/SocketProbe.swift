#if canImport(Glibc)
import Glibc
#endif

/// Tells a live control socket from a stale file left by a crash: only a live one accepts.
enum SocketProbe {
    static func isLive(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard var addr = UnixAddress(path) else { return false }
        return addr.connect(fd) == 0
    }
}

/// A `sockaddr_un` built from a path (≤ 107 bytes).
struct UnixAddress {
    private var storage = sockaddr_un()

    init?(_ path: String) {
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: storage.sun_path) else { return nil }
        storage.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &storage.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
    }

    mutating func connect(_ fd: Int32) -> Int32 {
        withUnsafePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}
