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
        struct Account: Decodable {
            var accountKey: String; var fingerprint: String; var metadataKey: String
            var proofKey: String; var previousKey: String; var successorKey: String
        }
        struct Wrapping: Decodable { var recoverySecret: String; var userId: String; var wrappingKey: String }
        struct KeyObj: Decodable {
            var recoveryKey: String; var userId: String; var objectKey: String; var accountKey: String
            var recoveryCreatedAt: Int64; var nonce: String; var bytes: String
        }
        struct Sealed: Decodable { var what: String; var accountKey: String; var objectKey: String; var nonce: String; var plaintext: String; var bytes: String }
        struct KeyObjV2: Decodable {
            var what: String; var recoveryKey: String; var userId: String; var objectKey: String; var accountKey: String
            var recoveryCreatedAt: Int64; var generation: UInt64; var nonces: [String]; var bytes: String
            var previous: String?; var endorsedBy: String?
        }
        struct Record: Decodable {
            var what: String; var accountKey: String; var userId: String; var objectKey: String; var nonces: [String]
            var plaintext: String; var bytes: String; var recoveryKey: String?; var recoveryCreatedAt: Int64?
        }
        var recoveryKeys: [Recovery]
        var recoveryParsing: [Parsing]
        var accountKeys: [Account]
        var wrappingKeys: [Wrapping]
        var keyObjects: [KeyObj]
        var sealedObjects: [Sealed]
        var keyObjectsV2: [KeyObjV2]
        var sealedRecords: [Record]
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
            #expect(key.proofKey.withUnsafeBytes(Array.init) == hex(v.proofKey))
            #expect(key.previousKey.withUnsafeBytes(Array.init) == hex(v.previousKey))
            #expect(key.successorKey.withUnsafeBytes(Array.init) == hex(v.successorKey))
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
            let bytes = KeyObject.wrapV1(AccountKey(bytes: hex(v.accountKey)), recoveryCreatedAt: v.recoveryCreatedAt, recovery: recovery,
                                         userId: v.userId, nonce: try AES.GCM.Nonce(data: hex(v.nonce)))
            #expect(bytes == hex(v.bytes))
            let opened = try KeyObject.unwrap(hex(v.bytes), recovery: recovery, userId: v.userId)
            #expect(opened.key.bytes == hex(v.accountKey) && opened.recoveryCreatedAt == v.recoveryCreatedAt)
        }
    }

    @Test func keyObjectsOfVersion2ByteForByte() throws {
        for v in Self.vectors.keyObjectsV2 {
            let recovery = try RecoveryKey.parse(v.recoveryKey)
            let key = AccountKey(bytes: hex(v.accountKey))
            let extras = KeyObject.Extras(generation: v.generation, previous: v.previous.map { AccountKey(bytes: hex($0)) },
                                          endorsedBy: v.endorsedBy.map { AccountKey(bytes: hex($0)) })
            let nonces = try v.nonces.map { try AES.GCM.Nonce(data: hex($0)) }
            let bytes = KeyObject.wrap(key, recoveryCreatedAt: v.recoveryCreatedAt, recovery: recovery, userId: v.userId, extras: extras,
                                       nonces: (nonces[0], nonces[1], nonces[2]))
            #expect(bytes == hex(v.bytes), "\(v.what)")
            let opened = try KeyObject.unwrap(hex(v.bytes), recovery: recovery, userId: v.userId)
            #expect(opened.key == key && opened.recoveryCreatedAt == v.recoveryCreatedAt && opened.generation == v.generation)
            #expect(opened.previous == extras.previous && opened.endorsed == (v.endorsedBy != nil))
            #expect(try KeyObject.standing(hex(v.bytes), holding: key, userId: v.userId) == .proven(generation: v.generation))
            if let by = extras.endorsedBy {
                #expect(try KeyObject.standing(hex(v.bytes), holding: by, userId: v.userId) == .successor)
            }
        }
    }

    @Test func deviceRecordsByteForByte() throws {
        for v in Self.vectors.sealedRecords {
            let key = AccountKey(bytes: hex(v.accountKey))
            let nonces = try v.nonces.map { try AES.GCM.Nonce(data: hex($0)) }
            let wrap = try v.recoveryKey.map { SealedRecord.Wrap(recovery: try RecoveryKey.parse($0), createdAt: v.recoveryCreatedAt ?? 0) }
            let bytes = SealedRecord.seal(hex(v.plaintext), key: key, wrap: wrap, userId: v.userId, objectKey: v.objectKey,
                                          nonces: (nonces[0], nonces[1]))
            #expect(bytes == hex(v.bytes), "\(v.what)")
            #expect(try SealedObject.open(hex(v.bytes), key: key.metadataKey, objectKey: v.objectKey) == hex(v.plaintext))
            if let wrap {
                let opened = SealedRecord.unwrap(hex(v.bytes), recovery: wrap.recovery, userId: v.userId, objectKey: v.objectKey)
                #expect(opened?.key == key && opened?.recoveryCreatedAt == wrap.createdAt)
            }
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
