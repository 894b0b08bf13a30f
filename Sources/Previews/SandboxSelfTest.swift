#if canImport(Glibc)
import Glibc
#endif

/// `photolalad __preview-worker --self-test`: inside the sandbox, tries what a hijacked
/// decoder would (open a file, make a file, open a socket, start a process) and prints
/// what happened. Exit 0 only if every attempt was refused.
enum SandboxSelfTest {
    static func run() -> Int32 {
        var allRefused = true
        func attempt(_ name: String, _ body: () -> Int32) {
            errno = 0
            let rc = body()
            let refused = rc < 0
            if !refused { allRefused = false }
            say("\(name): \(refused ? "refused (\(String(cString: strerror(errno))))" : "ALLOWED")")
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
        say(allRefused ? "sandbox: every attempt refused" : "sandbox: SOMETHING WAS ALLOWED")
        return allRefused ? 0 : 1
    }

    private static func say(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    }
}
