import Digests
import Foundation

/// The MD5s S3 checks a body against (`Content-MD5`) and the SHA-256 a plain-HTTP
/// request signs, from a key's hex MD5 or from the bytes of a file range.
extension S3Client {
    /// The base64 Content-MD5 for a 32-digit hex MD5 (the one in the object key); nil if
    /// `hex` is not 16 bytes of hex.
    package static func contentMD5(hex: String) -> String? {
        guard hex.utf8.count == 32, let bytes = Hex.bytes(hex) else { return nil }
        return Data(bytes).base64EncodedString()
    }

    /// The base64 Content-MD5 of a body held in memory.
    package static func contentMD5(of bytes: [UInt8]) -> String {
        Data(MD5.digest(bytes)).base64EncodedString()
    }

    /// The payload hash to sign for a body held in memory: its SHA-256 over plain HTTP,
    /// `UNSIGNED-PAYLOAD` over TLS (Content-MD5 guards the bytes).
    func payloadHash(of bytes: [UInt8]) -> String {
        signsPayload ? SHA256.hexDigest(bytes) : SigV4Signer.unsignedPayload
    }

    /// Digests of a file range in one read pass with a fixed buffer.
    package struct RangeDigest: Sendable, Equatable {
        /// Lowercase hex MD5.
        package var md5Hex: String
        /// Base64 MD5, the `Content-MD5` header value.
        package var contentMD5: String
        /// Lowercase hex SHA-256, when asked for.
        package var sha256Hex: String?
    }

    /// Reads `length` bytes from `offset` (to the end when nil) once, computing the MD5 and,
    /// if asked, the SHA-256. Blocking: it reads the file on the calling thread.
    package static func digestFileRange(path: String, offset: Int64 = 0, length: Int64? = nil,
                                       sha256: Bool = false, chunkSize: Int = 1 << 20) throws(S3Error) -> RangeDigest {
        let file = try OpenFile(path: path, operation: "Digest", key: nil)
        let length = try file.checkRange(offset: offset, length: length, operation: "Digest", key: nil)
        return try file.digest(offset: offset, length: length, md5: true, sha256: sha256, chunkSize: chunkSize,
                               operation: "Digest", key: nil)
    }
}
