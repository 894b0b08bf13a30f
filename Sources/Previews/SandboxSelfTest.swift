#if canImport(Glibc)
import Glibc
#endif
import CPreviews

/// `photolalad __preview-worker --self-test`: inside the sandbox, tries what a hijacked
/// decoder would (open, make or stat a named file, open a socket, start a process, signal
/// through fcntl, raise its own limits, read the daemon's environment) and what the
/// decoders need (stat and read a descriptor it holds, read its limits), and prints what
/// happened. Exit 0 only if every forbidden attempt was refused and every needed one worked.
enum SandboxSelfTest {
    static func run() -> Int32 {
        var passed = true
        func attempt(_ name: String, _ body: () -> Int32) {
            errno = 0
            let refused = body() < 0
            if !refused { passed = false }
            say("\(name): \(refused ? "refused (\(String(cString: strerror(errno))))" : "ALLOWED")")
        }
        /// Refused with EPERM, as the filter says it, not by some other error on the way.
        func forbidden(_ name: String, _ body: () -> Int32) {
            errno = 0
            let rc = body()
            let refused = rc < 0 && errno == EPERM
            if !refused { passed = false }
            say("\(name): \(refused ? "refused (\(String(cString: strerror(errno))))" : rc < 0 ? "FAILED OTHERWISE (\(String(cString: strerror(errno))))" : "ALLOWED")")
        }
        func needed(_ name: String, _ body: () -> Bool) {
            errno = 0
            let works = body()
            if !works { passed = false }
            say("\(name): \(works ? "works" : "BROKEN (\(String(cString: strerror(errno))))")")
        }

        attempt("open /etc/hostname") { open("/etc/hostname", O_RDONLY) }
        attempt("create /tmp/previews-self-test") { open("/tmp/previews-self-test", O_WRONLY | O_CREAT, 0o600) }
        attempt("socket AF_INET") { socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0) }
        attempt("socket AF_UNIX") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0) }
        attempt("fork") {
            let pid = fork()
            if pid == 0 { _exit(0) }
            return pid < 0 ? -1 : 0
        }
        attempt("execve /bin/true") {
            var argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
            return execve("/bin/true", &argv, nil)
        }
        attempt("mmap executable") {
            mmap(nil, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED ? -1 : 0
        }

        // Standard output: a descriptor the worker holds, as it holds a photo's.
        let held: Int32 = 1
        var inode: UInt64 = 0
        forbidden("fcntl F_SETOWN") { photolala_probe_fcntl(held, PHOTOLALA_FCNTL_SETOWN) }
        forbidden("fcntl F_SETSIG") { photolala_probe_fcntl(held, PHOTOLALA_FCNTL_SETSIG) }
        forbidden("fcntl F_SETFL O_ASYNC") { photolala_probe_fcntl(held, PHOTOLALA_FCNTL_SETFL_ASYNC) }
        forbidden("fcntl F_GETFD") { photolala_probe_fcntl(held, PHOTOLALA_FCNTL_GETFD) }
        forbidden("newfstatat /etc/hostname") { photolala_probe_fstatat(AT_FDCWD, "/etc/hostname", 0, &inode) }
        forbidden("newfstatat /etc/hostname with AT_EMPTY_PATH") { photolala_probe_fstatat(AT_FDCWD, "/etc/hostname", 1, &inode) }
        forbidden("statx /etc/hostname") { photolala_probe_statx(AT_FDCWD, "/etc/hostname", 0, &inode) }
        forbidden("statx /etc/hostname with AT_EMPTY_PATH") { photolala_probe_statx(AT_FDCWD, "/etc/hostname", 1, &inode) }
        attempt("newfstatat of the working directory") { photolala_probe_fstatat(AT_FDCWD, "", 1, &inode) }
        var cpu = rlimit()
        _ = getrlimit(__rlimit_resource_t(RLIMIT_CPU.rawValue), &cpu)
        forbidden("prlimit64 raising RLIMIT_CPU") {
            var raised = cpu
            raised.rlim_cur = cpu.rlim_max
            return setrlimit(__rlimit_resource_t(RLIMIT_CPU.rawValue), &raised)
        }
        forbidden("prlimit64 lowering RLIMIT_CPU") {
            var lowered = cpu
            lowered.rlim_cur = 1
            return setrlimit(__rlimit_resource_t(RLIMIT_CPU.rawValue), &lowered)
        }
        let variables = photolala_environment_count()
        if variables != 0 { passed = false }
        say("environment: \(variables == 0 ? "empty" : "\(variables) VARIABLES")")

        var expected: UInt64 = 0
        needed("fstat(2) of a held descriptor") { photolala_probe_fstat_syscall(held, &expected) == 0 }
        needed("fstat of a held descriptor (newfstatat with an empty path)") {
            inode = 0
            return photolala_probe_fstatat(held, "", 1, &inode) == 0 && inode == expected
        }
        needed("statx of a held descriptor with an empty path") {
            inode = 0
            return photolala_probe_statx(held, "", 1, &inode) == 0 && inode == expected
        }
        needed("getrlimit RLIMIT_CPU") {
            var now = rlimit()
            return getrlimit(__rlimit_resource_t(RLIMIT_CPU.rawValue), &now) == 0 && now.rlim_cur == cpu.rlim_cur
        }
        say(passed ? "sandbox: every attempt refused, every need met" : "sandbox: SOMETHING WAS ALLOWED OR BROKEN")
        return passed ? 0 : 1
    }

    private static func say(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    }
}
