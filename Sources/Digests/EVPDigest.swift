import COpenSSL

/// One OpenSSL EVP digest context: what `MD5` and `SHA256` are made of, so the context's
/// lifetime and OpenSSL's calls are written once.
///
/// Non-copyable because it owns the `EVP_MD_CTX`: a copy would share (and double-free) it.
struct EVPDigest: ~Copyable {
    private let context: OpaquePointer
    private let algorithm: OpaquePointer
    let byteCount: Int

    init(_ algorithm: OpaquePointer, byteCount: Int) {
        // Allocation only fails when memory is exhausted; nothing sensible is left to do then.
        guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
        self.context = context
        self.algorithm = algorithm
        self.byteCount = byteCount
        EVP_DigestInit_ex(context, algorithm, nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    /// The digest so far; the context starts over (for holders that cannot consume it).
    mutating func finalize() -> [UInt8] {
        let out = digest()
        EVP_DigestInit_ex(context, algorithm, nil)
        return out
    }

    /// The digest; the context is spent.
    consuming func finish() -> [UInt8] {
        digest()
    }

    private func digest() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &out, &length)
        return out
    }
}
