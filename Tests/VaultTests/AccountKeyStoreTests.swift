#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import Vault

@Suite struct AccountKeyStoreTests {
    let dir: String
    let store: AccountKeyStore

    init() throws {
        dir = NSTemporaryDirectory() + "account-key-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        store = AccountKeyStore(directory: dir)
    }

    func state(_ pending: AccountKeyState.Pending? = nil) -> AccountKeyState {
        AccountKeyState(userId: "u_1", accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 1_763_794_800_123, pending: pending)
    }

    func mode(_ path: String) -> mode_t {
        var st = stat()
        return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : 0
    }

    @Test func savesLoadsAndErases() throws {
        #expect(try store.load() == nil)
        let s = state(.creating)
        try store.save(s)
        #expect(try store.load() == s)
        #expect(mode(store.path) == 0o600)
        var done = s
        done.pending = nil
        try store.save(done)
        #expect(try store.load() == done)
        let rotating = state(.rotating(previous: .generate(), previousCreatedAt: 5))
        try store.save(rotating)
        #expect(try store.load() == rotating)
        // A new account key under way keeps the previous account key and recovery key too.
        var replacing = state(.newAccountKey(.init(accountKey: .generate(), recoveryKey: .generate(), recoveryCreatedAt: 3, generation: 4,
                                                    resealing: true)))
        replacing.generation = 5
        try store.save(replacing)
        #expect(try store.load() == replacing)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["account-key"])
        try store.erase()
        #expect(try store.load() == nil)
        try store.erase()
    }

    @Test func theFileIs0600AndAStaleTemporaryIsReplaced() throws {
        // A temporary file left by a killed write, even a link planted at its name, is not followed.
        let elsewhere = dir + "/elsewhere"
        try Data("keep".utf8).write(to: URL(fileURLWithPath: elsewhere))
        try FileManager.default.createSymbolicLink(atPath: dir + "/account-key.tmp", withDestinationPath: elsewhere)
        try store.save(state())
        #expect(mode(store.path) == 0o600)
        #expect(FileManager.default.contents(atPath: elsewhere) == Data("keep".utf8))
        #expect(!FileManager.default.fileExists(atPath: dir + "/account-key.tmp"))
    }

    @Test func aDamagedOrForeignFileIsRefusedWithWhatToDo() throws {
        let s = state()
        try store.save(s)
        var text = try String(contentsOfFile: store.path, encoding: .utf8)
        // A changed account key no longer matches its fingerprint.
        let encoded = Data(s.accountKey.bytes).base64EncodedString()
        let other = Data(AccountKey.generate().bytes).base64EncodedString()
        try text.replacingOccurrences(of: encoded, with: other).write(toFile: store.path, atomically: false, encoding: .utf8)
        let damaged = #expect(throws: AccountKeyStore.Failure.self) { try store.load() }
        #expect(damaged?.message.contains("recovery-key --enter") == true)
        try "not json".write(toFile: store.path, atomically: false, encoding: .utf8)
        #expect(throws: AccountKeyStore.Failure.self) { try store.load() }
        try store.save(s)
        text = try String(contentsOfFile: store.path, encoding: .utf8)
        try text.replacingOccurrences(of: "\"format\" : 1", with: "\"format\" : 7").write(toFile: store.path, atomically: false, encoding: .utf8)
        let newer = #expect(throws: AccountKeyStore.Failure.self) { try store.load() }
        #expect(newer?.message.contains("newer photolalad") == true)
        // A link at the file's name is not followed.
        try FileManager.default.removeItem(atPath: store.path)
        try FileManager.default.createSymbolicLink(atPath: store.path, withDestinationPath: "/etc/passwd")
        #expect(throws: AccountKeyStore.Failure.self) { try store.load() }
        // A FIFO there is refused without blocking.
        try FileManager.default.removeItem(atPath: store.path)
        #expect(mkfifo(store.path, 0o600) == 0)
        #expect(throws: AccountKeyStore.Failure.self) { try store.load() }
    }

    /// A second name kept on the file (as anyone reading the disk later would find its
    /// blocks) holds only zeros once the key file was replaced or erased.
    @Test func everyVersionIsOverwrittenBeforeItsNameGoes() throws {
        let first = state()
        try store.save(first)
        let kept = dir + "/kept-by-a-link"
        #expect(link(store.path, kept) == 0)
        let size = try Data(contentsOf: URL(fileURLWithPath: kept)).count
        var rotated = first
        rotated.recoveryKey = .generate()
        try store.save(rotated)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: kept))
        #expect(bytes.count == size && bytes.allSatisfy { $0 == 0 }, "the replaced version was overwritten")
        #expect(try store.load() == rotated)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["account-key", "kept-by-a-link"])
        unlink(kept)
        #expect(link(store.path, kept) == 0)
        try store.erase()
        bytes = try Data(contentsOf: URL(fileURLWithPath: kept))
        #expect(!bytes.isEmpty && bytes.allSatisfy { $0 == 0 }, "the erased file was overwritten")
        #expect(!String(decoding: bytes, as: UTF8.self).contains(rotated.recoveryKey.formatted))
        #expect(try store.load() == nil)
    }

    @Test func whenTheRecoveryKeyWasShownIsKept() throws {
        var s = state()
        try store.save(s)
        #expect(try store.load()?.recoveryShownAt == nil)
        s.recoveryShownAt = 1_763_794_900_000
        try store.save(s)
        #expect(try store.load()?.recoveryShownAt == 1_763_794_900_000)
        // A file of the release before has no such field: never shown, as far as this NAS knows.
        let text = try String(contentsOfFile: store.path, encoding: .utf8)
        let older = text.split(separator: "\n").filter { !$0.contains("recoveryKeyShownAt") }.joined(separator: "\n")
        // (sorted keys: `userId` follows, so the lines left still make one JSON object)
        try older.write(toFile: store.path, atomically: false, encoding: .utf8)
        #expect(try store.load()?.recoveryShownAt == nil)
    }

    @Test func noSecretInItsDescription() {
        let s = state()
        let text = "\(s)"
        #expect(!text.contains(s.recoveryKey.formatted) && text.contains(s.fingerprint))
        #expect(!text.contains(Data(s.accountKey.bytes).base64EncodedString()))
    }
}
