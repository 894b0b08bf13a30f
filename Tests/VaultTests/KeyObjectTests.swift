import Testing
import Vault

@Suite struct KeyObjectTests {
    let account = AccountKey.generate()
    let recovery = RecoveryKey.generate()

    // MARK: version 1, as earlier releases wrote it (still read)

    @Test func wrapsAndUnwrapsWithTheRecoveryKeyAlone() throws {
        let bytes = KeyObject.wrapV1(account, recoveryCreatedAt: 1_763_794_800_123, recovery: recovery, userId: "u_1")
        #expect(bytes.count == KeyObject.sizeV1 && bytes.starts(with: Array("PLAKEY".utf8) + [0, 1]))
        #expect(bytes != KeyObject.wrapV1(account, recoveryCreatedAt: 1_763_794_800_123, recovery: recovery, userId: "u_1"))
        let opened = try KeyObject.unwrap(bytes, recovery: try RecoveryKey.parse(recovery.formatted), userId: "u_1")
        #expect(opened.key == account && opened.recoveryCreatedAt == 1_763_794_800_123 && opened.version == 1)
        #expect(!bytes.windows(ofCount: 8).contains { Array($0) == Array(account.bytes.prefix(8)) })
        // A version-1 object proves nothing to a holder of the key.
        #expect(try KeyObject.standing(bytes, holding: account, userId: "u_1") == .unproven)
    }

    @Test func anotherRecoveryKeyAnotherAccountOrAFlippedByteIsRefused() {
        let bytes = KeyObject.wrapV1(account, recoveryCreatedAt: 0, recovery: recovery, userId: "u_1")
        let objectKey = KeyObject.objectKey(userId: "u_1")
        #expect(throws: VaultFailure.wrongRecoveryKey(objectKey)) { try KeyObject.unwrap(bytes, recovery: RecoveryKey.generate(), userId: "u_1") }
        #expect(throws: VaultFailure.wrongRecoveryKey(KeyObject.objectKey(userId: "u_2"))) {
            try KeyObject.unwrap(bytes, recovery: recovery, userId: "u_2")
        }
        for i in bytes.indices {
            var flipped = bytes
            flipped[i] ^= 0x10
            #expect(throws: VaultFailure.self) { try KeyObject.unwrap(flipped, recovery: recovery, userId: "u_1") }
        }
        #expect(throws: VaultFailure.notAKeyObject(objectKey)) { try KeyObject.unwrap(Array(bytes.dropLast()), recovery: recovery, userId: "u_1") }
        var later = bytes
        later[7] = 3
        #expect(throws: VaultFailure.newerFormat(objectKey, version: 3)) { try KeyObject.unwrap(later, recovery: recovery, userId: "u_1") }
        #expect(VaultFailure.wrongRecoveryKey(objectKey).description.contains("--rotate"))
    }

    // MARK: version 2: the proof

    @Test func aVersion2ObjectProvesItWasWrittenWithTheAccountKey() throws {
        let bytes = KeyObject.wrap(account, recoveryCreatedAt: 5, recovery: recovery, userId: "u_1", extras: .init(generation: 7))
        #expect(bytes.count == KeyObject.size && bytes.starts(with: Array("PLAKEY".utf8) + [0, 2]))
        let opened = try KeyObject.unwrap(bytes, recovery: recovery, userId: "u_1")
        #expect(opened.key == account && opened.generation == 7 && opened.previous == nil && !opened.endorsed)
        // A holder of K reads the proof without the recovery key; anyone else sees nothing.
        #expect(try KeyObject.standing(bytes, holding: account, userId: "u_1") == .proven(generation: 7))
        #expect(try KeyObject.standing(bytes, holding: .generate(), userId: "u_1") == .unproven)
        // An attacker's object: its own key under its own recovery key proves nothing to K.
        let forged = KeyObject.wrap(.generate(), recoveryCreatedAt: 5, recovery: .generate(), userId: "u_1", extras: .init(generation: 99))
        #expect(try KeyObject.standing(forged, holding: account, userId: "u_1") == .unproven)
        // Every byte is covered: the wrap, the sections byte, the proof.
        for i in bytes.indices {
            var flipped = bytes
            flipped[i] ^= 0x01
            #expect(throws: VaultFailure.self) { try KeyObject.unwrap(flipped, recovery: recovery, userId: "u_1") }
            #expect((try? KeyObject.standing(flipped, holding: account, userId: "u_1")) != .proven(generation: 7))
        }
        // The wrap of a proven object under another proof: the proof no longer opens.
        var spliced = bytes
        spliced.replaceSubrange(77..., with: forged[77...])
        #expect(throws: VaultFailure.unproven(KeyObject.objectKey(userId: "u_1"))) { try KeyObject.unwrap(spliced, recovery: recovery, userId: "u_1") }
    }

    @Test func aNewAccountKeyCarriesThePreviousOneAndItsEndorsement() throws {
        let previous = AccountKey.generate()
        let transition = KeyObject.wrap(account, recoveryCreatedAt: 5, recovery: recovery, userId: "u_1",
                                        extras: .init(generation: 2, previous: previous, endorsedBy: previous))
        let opened = try KeyObject.unwrap(transition, recovery: recovery, userId: "u_1")
        #expect(opened.previous == previous && opened.endorsed && opened.generation == 2)
        // The previous key's holders see a successor, not a substitution; and learn nothing of K.
        #expect(try KeyObject.standing(transition, holding: previous, userId: "u_1") == .successor)
        #expect(!transition.windows(ofCount: 8).contains { Array($0) == Array(account.bytes.prefix(8)) })
        let final = KeyObject.wrap(account, recoveryCreatedAt: 5, recovery: recovery, userId: "u_1",
                                   extras: .init(generation: 2, endorsedBy: previous))
        #expect(try KeyObject.unwrap(final, recovery: recovery, userId: "u_1").previous == nil)
        #expect(try KeyObject.standing(final, holding: previous, userId: "u_1") == .successor)
        // An endorsement copied onto another object does not hold for that one's wrap.
        var copied = KeyObject.wrap(.generate(), recoveryCreatedAt: 5, recovery: .generate(), userId: "u_1",
                                    extras: .init(generation: 2, endorsedBy: .generate()))
        copied.replaceSubrange(77..<109, with: final[77..<109])
        #expect(try KeyObject.standing(copied, holding: previous, userId: "u_1") == .unproven)
    }

    @Test func aDeviceRecordKeepsTheAccountKeyWrappedUnderTheRecoveryKey() throws {
        let objectKey = "metadata/u_1/devices/d/device.json"
        let plaintext = Array("{\"format\":2}".utf8)
        let record = SealedRecord.seal(plaintext, key: account, wrap: .init(recovery: recovery, createdAt: 9), userId: "u_1", objectKey: objectKey)
        #expect(record.starts(with: Array("PLMANIF".utf8) + [3, 68]))
        #expect(try SealedObject.open(record, key: account.metadataKey, objectKey: objectKey) == plaintext)
        #expect(SealedRecord.unwrap(record, recovery: recovery, userId: "u_1", objectKey: objectKey)?.key == account)
        #expect(SealedRecord.unwrap(record, recovery: .generate(), userId: "u_1", objectKey: objectKey) == nil)
        #expect(SealedRecord.unwrap(record, recovery: recovery, userId: "u_1", objectKey: objectKey + "x") == nil)
        // Without a wrap (an outdated recovery key), the record still seals.
        let bare = SealedRecord.seal(plaintext, key: account, wrap: nil, userId: "u_1", objectKey: objectKey)
        #expect(bare.starts(with: Array("PLMANIF".utf8) + [3, 0]) && !SealedRecord.hasWrap(bare))
        #expect(try SealedObject.open(bare, key: account.metadataKey, objectKey: objectKey) == plaintext)
        for i in record.indices {
            var flipped = record
            flipped[i] ^= 0x01
            #expect(throws: VaultFailure.self) { try SealedObject.open(flipped, key: account.metadataKey, objectKey: objectKey) }
        }
    }
}
