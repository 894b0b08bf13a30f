#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Digests
import PhotolalaCore
import Testing
import Upload

@Suite struct PartDigestsTests {
    let dir: String

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("part-digests-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    func file(_ name: String, bytes: Int) throws -> (String, FileIdentity, Data) {
        let path = dir + "/" + name
        let data = Data((0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        try data.write(to: URL(fileURLWithPath: path))
        var st = stat()
        #expect(stat(path, &st) == 0)
        return (path, FileIdentity(st), data)
    }

    func md5(_ data: Data) -> String {
        var m = MD5()
        data.withUnsafeBytes { m.update($0) }
        return Hex.string(m.finish())
    }

    @Test func partsAndTheWholeFileHaveTheirMD5s() throws {
        let (path, identity, data) = try file("a.dat", bytes: 3 << 20 + 123)
        let reader = PartDigests(try VerifiedFile(path: path, expected: identity))
        let first = try reader.next(length: 2 << 20, sha256: true)
        let rest = try reader.next(length: Int64(data.count - (2 << 20)), sha256: false)
        #expect(first.md5Hex == md5(data.prefix(2 << 20)))
        #expect(first.contentMD5 == Data(Hex.bytes(first.md5Hex)!).base64EncodedString())
        #expect(first.sha256Hex?.count == 64)
        #expect(rest.md5Hex == md5(data.suffix(from: 2 << 20)))
        #expect(rest.sha256Hex == nil)
        let (whole, unchanged) = reader.finish()
        #expect(whole == md5(data) && unchanged)
    }

    @Test func anotherFileThanTheHashedOneIsRefused() throws {
        let (path, identity, _) = try file("b.dat", bytes: 100)
        var other = identity
        other.size += 1
        #expect(throws: VerifiedFile.Failure.changed) { try VerifiedFile(path: path, expected: other) }
        #expect(throws: VerifiedFile.Failure.vanished) { try VerifiedFile(path: dir + "/missing", expected: identity) }
    }

    @Test func aFileThatShrinksWhileReadIsChanged() throws {
        let (path, identity, _) = try file("c.dat", bytes: 1000)
        let reader = PartDigests(try VerifiedFile(path: path, expected: identity))
        #expect(truncate(path, 10) == 0)
        var failure: VerifiedFile.Failure?
        do { _ = try reader.next(length: 1000, sha256: false) } catch { failure = error }
        guard case .changed? = failure else { Issue.record("expected .changed, got \(String(describing: failure))"); return }
    }
}
