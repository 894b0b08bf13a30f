import Foundation
import Testing
import Account

@Suite struct DeviceIdentityTests {
    func tempDir() throws -> String {
        let dir = NSTemporaryDirectory() + "device-id-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    @Test func madeOnceThenKept() throws {
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let identity = DeviceIdentity(stateDir: dir)
        #expect(identity.load() == nil)
        let id = try identity.loadOrCreate()
        #expect(DeviceIdentity.isValid(id))
        #expect(try identity.loadOrCreate() == id)
        #expect(DeviceIdentity(stateDir: dir).load() == id)
        let mode = try FileManager.default.attributesOfItem(atPath: identity.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test func survivesTheSignInBeingErased() throws {
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let id = try DeviceIdentity(stateDir: dir).loadOrCreate()
        AccountStore(stateDir: dir).erase()
        #expect(DeviceIdentity(stateDir: dir).load() == id)
    }

    @Test func onlyLowercaseUUIDsAreOurs() {
        #expect(DeviceIdentity.isValid("7d1e4c2a-9b3f-4e55-8c61-2f0a9d8e7b14"))
        #expect(!DeviceIdentity.isValid("7D1E4C2A-9B3F-4E55-8C61-2F0A9D8E7B14"))
        #expect(!DeviceIdentity.isValid("not-a-uuid"))
        #expect(!DeviceIdentity.isValid(""))
    }

    @Test func aDamagedFileIsReplaced() throws {
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let identity = DeviceIdentity(stateDir: dir)
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: identity.path))
        #expect(identity.load() == nil)
        let id = try identity.loadOrCreate()
        #expect(identity.load() == id)
    }
}
