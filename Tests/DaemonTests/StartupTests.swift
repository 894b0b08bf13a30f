#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import Daemon

@Suite struct StartupTests {
    let base = FileManager.default.temporaryDirectory.appendingPathComponent("daemon-startup-\(UUID().uuidString)").path

    @Test func theStateDirectoryIsCreatedPrivate() throws {
        let dir = base + "/state/nested"
        try Daemon.prepareStateDirectory(dir)
        var st = stat()
        #expect(stat(dir, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o700)
    }

    @Test func anExistingDirectoryIsMadePrivate() throws {
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        try Daemon.prepareStateDirectory(base)
        var st = stat()
        #expect(stat(base, &st) == 0 && st.st_mode & 0o777 == 0o700)
    }

    @Test func aFileWhereTheDirectoryShouldBeIsAClearError() throws {
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        let file = base + "/not-a-dir"
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        #expect {
            try Daemon.prepareStateDirectory(file)
        } throws: { error in
            "\(error)".contains("it is not a directory") && "\(error)".contains("daemon.state_dir")
        }
    }

    @Test func aMissingSocketGroupNamesTheCommandThatCreatesIt() {
        let (gid, note) = Daemon.lookupGroup("photolala-no-such-group-\(getpid())")
        #expect(gid == nil)
        #expect(note?.contains("groupadd --system photolala-no-such-group") == true)
        #expect(Daemon.lookupGroup("root").0 == 0)
    }
}
