import Digests

/// The ETag S3 gives an object, and what it proves about the bytes (s3-layout.md):
/// a single PUT's is the MD5 of its body; a multipart upload's is the MD5 of its parts'
/// binary MD5s followed by `-` and the part count. With SSE-KMS neither holds.
package enum ETag {
    /// A multipart upload's ETag from each part's 16-byte MD5, in part order.
    package static func multipart(partMD5s: [[UInt8]]) -> String {
        var md5 = MD5()
        for part in partMD5s { md5.update(part) }
        return Hex.string(md5.finish()) + "-\(partMD5s.count)"
    }

    /// 32 lowercase-or-uppercase hex digits: the form of a single PUT's ETag.
    package static func isPlainMD5(_ etag: String) -> Bool {
        etag.utf8.count == 32 && Hex.bytes(etag) != nil
    }

    /// The part count of a multipart ETag (`…-N`), nil for any other form.
    package static func partCount(_ etag: String) -> Int? {
        guard let dash = etag.lastIndex(of: "-"), isPlainMD5(String(etag[..<dash])) else { return nil }
        return Int(etag[etag.index(after: dash)...]).flatMap { $0 > 0 ? $0 : nil }
    }

    /// Two ETags name the same bytes: case does not matter, quotes are already gone.
    package static func same(_ a: String, _ b: String) -> Bool {
        a.lowercased() == b.lowercased()
    }
}
