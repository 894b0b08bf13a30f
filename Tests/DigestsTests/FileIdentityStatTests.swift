#if canImport(Glibc)
import Glibc
#endif
import Digests
import PhotolalaCore
import Testing

@Suite struct FileIdentityStatTests {
    @Test("device, inode, size and mtime with nanoseconds come from the stat, and a rewrite shows")
    func fromStat() throws {
        let path = "/tmp/digests-identity-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        defer { close(fd); unlink(path) }
        #expect(write(fd, "12345", 5) == 5)
        var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 123_456_789), timespec(tv_sec: 1_700_000_000, tv_nsec: 123_456_789)]
        #expect(futimens(fd, &times) == 0)

        var st = stat()
        try #require(fstat(fd, &st) == 0)
        let identity = FileIdentity(st)
        #expect(identity == FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: 5,
                                         mtimeSec: 1_700_000_000, mtimeNsec: 123_456_789))

        // Same size, mtime one nanosecond later: another identity.
        times[1].tv_nsec += 1
        #expect(futimens(fd, &times) == 0)
        try #require(fstat(fd, &st) == 0)
        #expect(FileIdentity(st) != identity)
    }
}
