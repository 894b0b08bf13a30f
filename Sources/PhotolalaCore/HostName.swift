#if canImport(Glibc)
import Glibc
#endif

/// The machine's name, the default `account.device_name` shown when pairing.
package enum HostName {
    package static func current() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "nas" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "nas" : name
    }
}
