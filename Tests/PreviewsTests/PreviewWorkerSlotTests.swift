import Foundation
import Testing
import Previews

/// The daemon's side of a worker that dies, hangs or cannot start: the photo gets a
/// reason, the next photo gets a fresh worker. The "workers" are small Python scripts
/// speaking the protocol, so each way of failing is certain.
@Suite(.serialized) struct PreviewWorkerSlotTests {
    /// Says it is ready, then does `onRequest` with the first request.
    static func script(_ onRequest: String) throws -> String {
        try file("""
            #!/usr/bin/env python3
            import os, signal, socket, struct, time
            s = socket.socket(fileno=3)
            hello = bytes([1]) + bytes(8) + bytes([0, 0, 0, 0, 0])
            s.sendall(struct.pack(">I", len(hello)) + hello)
            s.recvmsg(4096, 64)
            \(onRequest)
            """)
    }

    /// Refuses to start as the real worker does when a library is missing: a hello that
    /// carries the reason, then exit 70.
    static func refusing(_ why: String) throws -> String {
        try file("""
            #!/usr/bin/env python3
            import os, socket, struct
            s = socket.socket(fileno=3)
            why = \(String(reflecting: why)).encode()
            hello = bytes([1]) + bytes(8) + bytes([0, 0, 0, 1]) + struct.pack(">I", len(why)) + why + bytes([0])
            s.sendall(struct.pack(">I", len(hello)) + hello)
            os._exit(70)
            """)
    }

    static func file(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fake-worker-\(UUID().uuidString)").path
        // Close-on-exec: a process another test starts meanwhile must not inherit the file
        // open for writing (its exec would then fail with "Text file busy").
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        return path
    }

    func slot(_ executable: String, timeout: Duration = .seconds(10), cpuSeconds: Int32? = nil) -> PreviewWorkerSlot {
        var options = PreviewWorkerSlot.Options()
        options.executable = executable
        options.timeout = timeout
        if let cpuSeconds { options.limits.cpuSecondsPerPhoto = cpuSeconds }
        return PreviewWorkerSlot(options: options)
    }

    let request = WorkerMessage.Request(format: .jpeg, wantThumbnail: true)

    @Test func aCrashCostsThatPhotoAndTheNextGetsANewWorker() async throws {
        let s = slot(try Self.script("os.kill(os.getpid(), signal.SIGSEGV)"))
        let fd = open("/dev/null", O_RDONLY)
        defer { close(fd) }
        let r = await s.read(fd: fd, request)
        #expect(r == .crashed("the decoder crashed (SIGSEGV)"), "\(r)")
        let first = await s.lastPID
        let again = await s.read(fd: fd, request)
        #expect(again == .crashed("the decoder crashed (SIGSEGV)"), "\(again)")
        #expect(await s.lastPID != first, "started again")
    }

    @Test func aWorkerOverItsCPUTimeIsNamed() async throws {
        let s = slot(try Self.script("os.kill(os.getpid(), signal.SIGXCPU)"))
        let fd = open("/dev/null", O_RDONLY)
        defer { close(fd) }
        let r = await s.read(fd: fd, request)
        #expect(r == .crashed("the decoder used up its CPU time"), "\(r)")
    }

    /// The CPU limit is the daemon's to set (the sandboxed worker may not touch its own
    /// limits): a worker that spins on a photo is ended by it long before the wall clock.
    @Test func theDaemonSetsEachPhotosCPULimit() async throws {
        // Without the daemon's limit the script would spin until the wall clock's minute.
        let s = slot(try Self.script("while True: pass"), timeout: .seconds(60), cpuSeconds: 1)
        let fd = open("/dev/null", O_RDONLY)
        defer { close(fd) }
        let r = await s.read(fd: fd, request)
        #expect(r == .crashed("the decoder used up its CPU time"), "\(r)")
    }

    /// Nothing of the daemon's environment (this test process has PATH, HOME …) reaches
    /// the worker: what it was started with (/proc/self/environ, before Python adds
    /// anything) is empty.
    @Test func theWorkerStartsWithAnEmptyEnvironment() async throws {
        #expect(!ProcessInfo.processInfo.environment.isEmpty)
        let s = slot(try Self.file("""
            #!/usr/bin/env python3
            import os, socket, struct
            s = socket.socket(fileno=3)
            why = ("environment " + repr(open("/proc/self/environ", "rb").read())).encode()
            hello = bytes([1]) + bytes(8) + bytes([0, 0, 0, 1]) + struct.pack(">I", len(why)) + why + bytes([0])
            s.sendall(struct.pack(">I", len(hello)) + hello)
            os._exit(70)
            """))
        let fd = open("/dev/null", O_RDONLY)
        defer { close(fd) }
        let r = await s.read(fd: fd, request)
        #expect(r == .unavailable("environment b''"), "\(r)")
    }

    @Test func aHungWorkerIsKilledAtTheTimeout() async throws {
        let s = slot(try Self.script("time.sleep(60)"), timeout: .milliseconds(300))
        let fd = open("/dev/null", O_RDONLY)
        defer { close(fd) }
        let started = ContinuousClock.now
        let r = await s.read(fd: fd, request)
        #expect(r == .crashed("the decoder took too long and was stopped"), "\(r)")
        #expect(ContinuousClock.now - started < .seconds(5))
        let pid = await s.lastPID
        #expect(kill(pid, 0) != 0, "the hung worker is gone")
    }

    @Test func aWorkerAnsweringNonsenseIsTreatedAsACrash() async throws {
        let s = slot(try Self.script("s.sendall(struct.pack('>I', 1 << 30)); time.sleep(5)"))
        let fd = open("/dev/null", O_RDONLY)
        defer { close(fd) }
        guard case .crashed(let why) = await s.read(fd: fd, request) else { Issue.record("accepted nonsense"); return }
        #expect(why.contains("nonsense"))
    }

    @Test func aMissingLibraryIsSaidAsTheWorkerSaysIt() async throws {
        let why = "libvips42 is not installed: libvips.so.42: cannot open shared object file: No such file or directory (apt-get install libvips42)"
        let s = slot(try Self.refusing(why))
        let fd = open("/dev/null", O_RDONLY)
        defer { close(fd) }
        let r = await s.read(fd: fd, request)
        #expect(r == .unavailable(why), "\(r)")
    }

    @Test func aWorkerThatCannotStartIsNotThePhotosFault() async {
        let s = slot("/nonexistent/photolalad")
        let fd = open("/dev/null", O_RDONLY)
        defer { close(fd) }
        guard case .unavailable = await s.read(fd: fd, request) else { Issue.record("blamed the photo"); return }
    }
}
