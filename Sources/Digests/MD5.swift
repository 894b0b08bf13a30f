import COpenSSL

/// Incremental MD5 through OpenSSL's EVP interface (the same code path md5sum-class tools use).
package struct MD5: ~Copyable {
    package static let byteCount = 16

    private var context = EVPDigest(EVP_md5(), byteCount: MD5.byteCount)

    package init() {}

    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        context.update(bytes)
    }

    package mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The 16-byte digest; the context is spent.
    package consuming func finish() -> [UInt8] {
        context.finish()
    }

    /// The digest so far; the context starts over (for holders that cannot consume it).
    package mutating func finalize() -> [UInt8] {
        context.finalize()
    }

    package static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var m = MD5()
        m.update(bytes)
        return m.finish()
    }
}
