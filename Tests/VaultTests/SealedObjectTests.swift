import Testing
import Vault

@Suite struct SealedObjectTests {
    let account = AccountKey.generate()
    let key = "metadata/u_1/devices/d1/log/000000000001.plm"

    @Test func sealsAndOpensWithAFreshNonceEachTime() throws {
        let plain = Array("every path, name, size and time".utf8)
        let a = SealedObject.seal(plain, key: account.metadataKey, objectKey: key)
        let b = SealedObject.seal(plain, key: account.metadataKey, objectKey: key)
        #expect(a != b && a.count == plain.count + SealedObject.overhead)
        #expect(!a.windows(ofCount: 5).contains { Array($0) == Array("every".utf8) })
        #expect(try SealedObject.open(a, key: account.metadataKey, objectKey: key) == plain)
        #expect(try SealedObject.open(SealedObject.seal([], key: account.metadataKey, objectKey: key), key: account.metadataKey, objectKey: key) == [])
    }

    @Test func aFlippedByteAMovedObjectOrAnotherKeyDoesNotOpen() throws {
        let sealed = SealedObject.seal(Array(repeating: 7, count: 100), key: account.metadataKey, objectKey: key)
        for i in sealed.indices {
            var flipped = sealed
            flipped[i] ^= 0x01
            #expect(throws: VaultFailure.self) { try SealedObject.open(flipped, key: account.metadataKey, objectKey: key) }
        }
        #expect(throws: VaultFailure.doesNotOpen("metadata/u_1/devices/d2/log/000000000001.plm")) {
            try SealedObject.open(sealed, key: account.metadataKey, objectKey: "metadata/u_1/devices/d2/log/000000000001.plm")
        }
        #expect(throws: VaultFailure.doesNotOpen(key)) { try SealedObject.open(sealed, key: AccountKey.generate().metadataKey, objectKey: key) }
        #expect(throws: VaultFailure.doesNotOpen(key)) { try SealedObject.open(Array(sealed.dropLast()), key: account.metadataKey, objectKey: key) }
        #expect(throws: VaultFailure.notSealed(key)) { try SealedObject.open(Array(sealed.prefix(30)), key: account.metadataKey, objectKey: key) }
    }

    @Test func formatOneAndLaterFormatsAreToldApart() {
        let plaintext: [UInt8] = Array("PLMANIF".utf8) + [1] + Array(repeating: 0, count: 60)
        #expect(throws: VaultFailure.plaintext(key)) { try SealedObject.open(plaintext, key: account.metadataKey, objectKey: key) }
        // 0x03 is this release's device record (`SealedRecord`); 0x04 and up are later formats.
        let later: [UInt8] = Array("PLMANIF".utf8) + [4] + Array(repeating: 0, count: 60)
        #expect(throws: VaultFailure.newerFormat(key, version: 4)) { try SealedObject.open(later, key: account.metadataKey, objectKey: key) }
        let record: [UInt8] = Array("PLMANIF".utf8) + [3, 0] + Array(repeating: 0, count: 60)
        #expect(throws: VaultFailure.doesNotOpen(key)) { try SealedObject.open(record, key: account.metadataKey, objectKey: key) }
        #expect(throws: VaultFailure.notSealed(key)) { try SealedObject.open(Array("{\"format\":1}".utf8), key: account.metadataKey, objectKey: key) }
    }

    @Test func theMetadataKeyAndFingerprintAreDerivedNotTheKeyItself() {
        #expect(account.fingerprint.count == 32 && account.fingerprint.allSatisfy { "0123456789abcdef".contains($0) })
        #expect(account.fingerprint == AccountKey(bytes: account.bytes).fingerprint)
        #expect(account.fingerprint != AccountKey.generate().fingerprint)
        #expect(account.metadataKey.key.withUnsafeBytes(Array.init) != account.bytes)
    }
}

extension Array {
    func windows(ofCount n: Int) -> [ArraySlice<Element>] {
        count < n ? [] : (0...(count - n)).map { self[$0..<$0 + n] }
    }
}
