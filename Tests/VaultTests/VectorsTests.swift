import Crypto
import Foundation
import Testing
@testable import Vault

/// Tests/vectors/vault.json, shared with the Python reader (Tests/e2e/test_vault_vectors.py):
/// the same inputs must give the very same bytes on both sides.
@Suite struct VectorsTests {
    struct Vectors: Decodable {
        struct Recovery: Decodable { var secret: String; var check: String; var text: String }
        struct Parsing: Decodable { var input: String; var secret: String?; var error: String? }
        struct Account: Decodable { var accountKey: String; var fingerprint: String; var metadataKey: String }
        struct Wrapping: Decodable { var recoverySecret: String; var userId: String; var wrappingKey: String }
        struct KeyObj: Decodable {
            var recoveryKey: String; var userId: String; var objectKey: String; var accountKey: String
            var recoveryCreatedAt: Int64; var nonce: String; var bytes: String
        }
        struct Sealed: Decodable { var what: String; var accountKey: String; var objectKey: String; var nonce: String; var plaintext: String; var bytes: String }
        var recoveryKeys: [Recovery]
        var recoveryParsing: [Parsing]
        var accountKeys: [Account]
        var wrappingKeys: [Wrapping]
        var keyObjects: [KeyObj]
        var sealedObjects: [Sealed]
    }

    static let vectors: Vectors = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("vectors/vault.json")
        return try! JSONDecoder().decode(Vectors.self, from: Data(contentsOf: url))
    }()

    @Test func recoveryKeysFormatAndParse() throws {
        for v in Self.vectors.recoveryKeys {
            let key = RecoveryKey(secret: hex(v.secret))
            #expect(key.check == hex(v.check))
            #expect(key.formatted == v.text)
            #expect(try RecoveryKey.parse(v.text) == key)
        }
    }

    @Test func recoveryKeysAreReadAsTyped() {
        for v in Self.vectors.recoveryParsing {
            do {
                let key = try RecoveryKey.parse(v.input)
                #expect(v.secret.map(hex) == key.secret, "\(v.input)")
            } catch {
                let kind = switch error {
                case .character: "character"
                case .length: "length"
                case .typo: "typo"
                }
                #expect(v.error == kind, "\(v.input): \(error)")
            }
        }
    }

    @Test func accountKeyDerivations() {
        for v in Self.vectors.accountKeys {
            let key = AccountKey(bytes: hex(v.accountKey))
            #expect(key.fingerprint == v.fingerprint)
            #expect(key.metadataKey.key.withUnsafeBytes(Array.init) == hex(v.metadataKey))
        }
    }

    @Test func wrappingKeys() {
        for v in Self.vectors.wrappingKeys {
            let w = RecoveryKey(secret: hex(v.recoverySecret)).wrappingKey(userId: v.userId)
            #expect(w.withUnsafeBytes(Array.init) == hex(v.wrappingKey))
        }
    }

    @Test func keyObjectsByteForByte() throws {
        for v in Self.vectors.keyObjects {
            let recovery = try RecoveryKey.parse(v.recoveryKey)
            #expect(KeyObject.objectKey(userId: v.userId) == v.objectKey)
            let bytes = KeyObject.wrap(AccountKey(bytes: hex(v.accountKey)), recoveryCreatedAt: v.recoveryCreatedAt, recovery: recovery,
                                       userId: v.userId, nonce: try AES.GCM.Nonce(data: hex(v.nonce)))
            #expect(bytes == hex(v.bytes))
            let opened = try KeyObject.unwrap(hex(v.bytes), recovery: recovery, userId: v.userId)
            #expect(opened.key.bytes == hex(v.accountKey) && opened.recoveryCreatedAt == v.recoveryCreatedAt)
        }
    }

    @Test func sealedObjectsByteForByte() throws {
        for v in Self.vectors.sealedObjects {
            let key = AccountKey(bytes: hex(v.accountKey)).metadataKey
            let bytes = SealedObject.seal(hex(v.plaintext), key: key, objectKey: v.objectKey, nonce: try AES.GCM.Nonce(data: hex(v.nonce)))
            #expect(bytes == hex(v.bytes), "\(v.what)")
            #expect(try SealedObject.open(hex(v.bytes), key: key, objectKey: v.objectKey) == hex(v.plaintext))
        }
    }
}

func hex(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var i = s.startIndex
    while i < s.endIndex {
        let j = s.index(i, offsetBy: 2)
        out.append(UInt8(s[i..<j], radix: 16)!)
        i = j
    }
    return out
}
