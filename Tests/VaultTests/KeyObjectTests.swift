import Testing
@testable import Vault

@Suite struct KeyObjectTests {
    let account = AccountKey.generate()
    let recovery = RecoveryKey.generate()

    @Test func wrapsAndUnwrapsWithTheRecoveryKeyAlone() throws {
        let bytes = KeyObject.wrap(account, recoveryCreatedAt: 1_763_794_800_123, recovery: recovery, userId: "u_1")
        #expect(bytes.count == KeyObject.size && bytes.starts(with: Array("PLAKEY".utf8) + [0, 1]))
        #expect(bytes != KeyObject.wrap(account, recoveryCreatedAt: 1_763_794_800_123, recovery: recovery, userId: "u_1"))
        let opened = try KeyObject.unwrap(bytes, recovery: try RecoveryKey.parse(recovery.formatted), userId: "u_1")
        #expect(opened.key == account && opened.recoveryCreatedAt == 1_763_794_800_123)
        #expect(!bytes.windows(ofCount: 8).contains { Array($0) == Array(account.bytes.prefix(8)) })
    }

    @Test func anotherRecoveryKeyAnotherAccountOrAFlippedByteIsRefused() {
        let bytes = KeyObject.wrap(account, recoveryCreatedAt: 0, recovery: recovery, userId: "u_1")
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
        later[7] = 2
        #expect(throws: VaultFailure.newerFormat(objectKey, version: 2)) { try KeyObject.unwrap(later, recovery: recovery, userId: "u_1") }
        #expect(VaultFailure.wrongRecoveryKey(objectKey).description.contains("--rotate"))
    }
}
