#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CPreviews

/// The preview worker: `photolalad __preview-worker`, started by the daemon with one end
/// of a socket pair as descriptor 3. It starts libvips and LibRaw, then shuts itself in
/// (`photolala_sandbox_enter`: no files, no network, no new processes, limited memory)
/// and answers one photo descriptor at a time. It holds no credentials and can reach
/// nothing but the descriptors it is handed.
package enum PreviewWorker {
    package static let subcommand = "__preview-worker"
    static let channel: Int32 = 3

    package static func main(_ arguments: [String]) -> Never {
        // The daemon passes no environment; started any other way, the worker drops what it
        // got before libvips and GLib read their settings from it.
        clearenv()
        _ = photolala_disable_core_dumps()
        photolala_tune_malloc()
        photolala_lowest_priority()
        let limits = PreviewLimits(arguments: arguments)
        let selfTest = arguments.contains("--self-test")
        var error = [CChar](repeating: 0, count: 512)
        if ptm_library_init(&error, error.count) != 0 {
            exit(refuse(CText.string(error), code: 70))
        }
        // Nothing the libraries print after this reaches the journal; reasons travel in replies.
        if !selfTest { dup2(1, 2) }
        if photolala_sandbox_enter(channel, limits.addressSpace, &error, error.count) != 0 {
            exit(refuse("the sandbox could not be set up: \(CText.string(error))", code: 71))
        }
        if selfTest { exit(SandboxSelfTest.run()) }
        send(WorkerMessage.Reply())
        serve(limits)
    }

    private static func refuse(_ why: String, code: Int32) -> Int32 {
        send(.failed(why))
        return code
    }

    private static func serve(_ limits: PreviewLimits) -> Never {
        var frames = WorkerMessage.FrameReader()
        var buffer = [UInt8](repeating: 0, count: 4096)
        var pending: Int32 = -1
        while true {
            var received: Int32 = -1
            let n = photolala_receive_with_fd(channel, &buffer, buffer.count, &received)
            if n <= 0 { exit(0) }  // the daemon closed its end: stop
            if received >= 0 {
                if pending >= 0 { close(pending) }
                pending = received
            }
            frames.append(buffer[0..<n])
            while let body = try? frames.next() {
                let reply: WorkerMessage.Reply
                if pending < 0 {
                    reply = .failed("no file came with the request")
                } else if let request = try? WorkerMessage.decodeRequest(body) {
                    reply = PreviewRenderer(limits: limits).read(fd: pending, request)
                } else {
                    reply = .failed("the request could not be read")
                }
                if pending >= 0 { close(pending); pending = -1 }
                send(reply)
            }
        }
    }

    private static func send(_ reply: WorkerMessage.Reply) {
        let frame = WorkerMessage.frame(WorkerMessage.encode(reply))
        frame.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = photolala_send_with_fd(channel, raw.baseAddress! + offset, raw.count - offset, -1)
                if n <= 0 { exit(0) }
                offset += n
            }
        }
    }
}
