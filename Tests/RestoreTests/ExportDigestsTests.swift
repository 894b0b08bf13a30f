import ManifestFormat
import Testing
@testable import Restore

/// What an export takes from the account's sealed manifests: the SHA-256 and size recorded
/// for each MD5 it writes, none where two manifests disagree.
@Suite struct ExportDigestsTests {
    func md5(_ n: UInt64) -> MD5Value { MD5Value(high: 0, low: n) }
    func sha(_ n: UInt8) -> SHA256Value { SHA256Value(bytes: [UInt8](repeating: n, count: 32))! }

    func entry(_ md5: MD5Value, size: Int64 = 100, sha256: SHA256Value?) -> ManifestEntry {
        ManifestEntry(kind: .appeared, folder: "/srv/photos", path: Array("a.jpg".utf8), time: 1,
                      version: FileVersion(size: size, md5: md5, mtimeSec: 0, mtimeNsec: 0, sha256: sha256))
    }

    @Test func onlyTheWantedMD5sAreKeptWithTheirSHA256AndSize() {
        var d = ExportDigests()
        d.add([entry(md5(1), sha256: sha(1)), entry(md5(2), sha256: sha(2)), entry(md5(3), sha256: nil)], wanted: [md5(1), md5(3)])
        #expect(d.known == [md5(1): .init(size: 100, sha256: sha(1)), md5(3): .init(size: 100, sha256: nil)])
        // A later entry (another device's) fills in a SHA-256 the first did not record.
        d.add([entry(md5(3), sha256: sha(3))], wanted: [md5(1), md5(3)])
        #expect(d.known[md5(3)] == .init(size: 100, sha256: sha(3)))
    }

    @Test func twoManifestsThatDisagreeGiveNoValue() {
        var d = ExportDigests()
        let wanted: Set = [md5(1), md5(2)]
        d.add([entry(md5(1), sha256: sha(1)), entry(md5(2), sha256: sha(2))], wanted: wanted)
        // Another SHA-256 for the same MD5 and size: checked by MD5 alone, bounded by the size.
        d.add([entry(md5(1), sha256: sha(9))], wanted: wanted)
        // Another size: no bound either.
        d.add([entry(md5(2), size: 7, sha256: sha(2))], wanted: wanted)
        // And they stay so whatever comes after.
        d.add([entry(md5(1), sha256: sha(1)), entry(md5(2), sha256: sha(2))], wanted: wanted)
        #expect(d.known == [md5(1): .init(size: 100, sha256: nil), md5(2): .init(size: nil, sha256: nil)])
    }
}
