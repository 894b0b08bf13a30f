#if canImport(Glibc)
import Glibc
#endif
/// A path (or a single name) compared byte for byte.
///
/// Swift's `String ==` is Unicode canonical equivalence: "Café" spelt with a precomposed
/// "é" (NFC, what Linux and Windows clients write) and with "e" plus a combining accent
/// (NFD, what a Mac client writes over SMB) are equal `String`s, yet on Linux they are two
/// different names, and can be two files side by side. Every set or dictionary the daemon
/// keys by path must tell them apart, or one of the twins is taken for the other: never
/// hashed, never watched (the filesystem suite found both). `String`'s own storage keeps
/// the bytes as they came from the kernel, so comparing its UTF-8 is exact.
package struct ExactPath: Hashable, Sendable, CustomStringConvertible {
    package let string: String

    package init(_ string: String) {
        self.string = string
    }

    package static func == (a: ExactPath, b: ExactPath) -> Bool {
        ExactPath.bytesEqual(a.string, b.string)
    }

    /// Whether two strings hold the same UTF-8 bytes: one `memcmp` of their storage (a
    /// byte-by-byte walk of `utf8` was 2 % of the daemon's CPU writing a manifest).
    package static func bytesEqual(_ a: String, _ b: String) -> Bool {
        var a = a
        var b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in x.count == y.count && (x.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0) }
        }
    }

    /// Whether `a`'s UTF-8 bytes begin with `prefix`'s.
    package static func bytesStart(_ a: String, with prefix: String) -> Bool {
        var a = a
        var prefix = prefix
        return a.withUTF8 { x in
            prefix.withUTF8 { y in x.count >= y.count && (y.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, y.count) == 0) }
        }
    }

    /// Whether two paths name entries of the same folder, byte for byte.
    package static func sameParent(_ a: String, _ b: String) -> Bool {
        var a = a
        var b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                guard let i = x.lastIndex(of: UInt8(ascii: "/")), let j = y.lastIndex(of: UInt8(ascii: "/")), i == j else { return false }
                return memcmp(x.baseAddress!, y.baseAddress!, i) == 0
            }
        }
    }

    package func hash(into hasher: inout Hasher) {
        var string = self.string
        string.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    package var description: String { string }
}

/// A dictionary keyed by `String` whose keys compare byte for byte (see `ExactPath`):
/// a drop-in for `[String: Value]` where keys are paths or names from the filesystem.
package struct ExactKeyed<Value> {
    package private(set) var storage: [ExactPath: Value] = [:]

    package init() {}

    package subscript(key: String) -> Value? {
        get { storage[ExactPath(key)] }
        set { storage[ExactPath(key)] = newValue }
    }

    package subscript(key: String, default value: @autoclosure () -> Value) -> Value {
        get { storage[ExactPath(key)] ?? value() }
        set { storage[ExactPath(key)] = newValue }
    }

    @discardableResult
    package mutating func removeValue(forKey key: String) -> Value? {
        storage.removeValue(forKey: ExactPath(key))
    }

    package mutating func removeAll() { storage.removeAll() }

    package var keys: [String] { storage.keys.map(\.string) }
    package var values: Dictionary<ExactPath, Value>.Values { storage.values }
    package var count: Int { storage.count }
    package var isEmpty: Bool { storage.isEmpty }

    /// (key, value) pairs, as iterating a `[String: Value]` gives.
    package var pairs: [(key: String, value: Value)] { storage.map { ($0.key.string, $0.value) } }
}

extension ExactKeyed: Sendable where Value: Sendable {}
extension ExactKeyed: ExpressibleByDictionaryLiteral {
    package init(dictionaryLiteral elements: (String, Value)...) {
        for (k, v) in elements { storage[ExactPath(k)] = v }
    }
}

extension ExactKeyed: Sendable where Value: Sendable {}
