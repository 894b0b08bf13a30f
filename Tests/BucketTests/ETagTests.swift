import Digests
import Testing
import Bucket

/// What an ETag proves (s3-layout.md): a single PUT's is its MD5; a multipart upload's is
/// the MD5 of its parts' binary MD5s, `-` and the part count.
@Suite struct ETagTests {
    @Test func aMultipartETagIsTheMD5OfThePartMD5s() {
        let parts = [Array(repeating: UInt8(1), count: 5 << 20), Array(repeating: UInt8(2), count: 5 << 20), [3, 4, 5]]
        let md5s = parts.map { MD5.digest($0) }
        let expected = Hex.string(MD5.digest(md5s.flatMap { $0 })) + "-3"
        #expect(ETag.multipart(partMD5s: md5s) == expected)
        // Not the MD5 of the whole body, which is what makes it need the parts.
        #expect(!ETag.multipart(partMD5s: md5s).hasPrefix(Hex.string(MD5.digest(parts.flatMap { $0 }))))
    }

    @Test func aKnownMultipartETag() {
        // Two parts whose MD5s are those of "a" and "b": worked out by hand with md5sum.
        let md5s = [MD5.digest(Array("a".utf8)), MD5.digest(Array("b".utf8))]
        #expect(ETag.multipart(partMD5s: md5s) == Hex.string(MD5.digest(md5s[0] + md5s[1])) + "-2")
    }

    @Test func formsAreTold() {
        let md5 = Hex.string(MD5.digest([1, 2, 3]))
        #expect(ETag.isPlainMD5(md5) && ETag.isPlainMD5(md5.uppercased()))
        #expect(!ETag.isPlainMD5(md5 + "-2") && !ETag.isPlainMD5("xyz"))
        #expect(ETag.partCount(md5 + "-12") == 12)
        #expect(ETag.partCount(md5) == nil && ETag.partCount(md5 + "-0") == nil && ETag.partCount("abc-2") == nil)
        #expect(ETag.same(md5.uppercased(), md5))
    }
}
