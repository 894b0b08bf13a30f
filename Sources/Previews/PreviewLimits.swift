/// What one photo may cost the preview worker. The memory and pixel limits are passed on
/// its command line, so the daemon's choice is the one enforced; the CPU time is set by
/// the daemon itself before each photo (the sandboxed worker cannot change its limits).
package struct PreviewLimits: Sendable, Equatable {
    /// RLIMIT_AS of the worker: libvips, LibRaw and one photo's buffers.
    package var addressSpace: UInt64 = 1 << 30
    /// CPU seconds per photo (the worker's RLIMIT_CPU, raised by the daemon before each one).
    package var cpuSecondsPerPhoto: Int32 = 20
    /// Images declaring more pixels are refused from their header, before decoding:
    /// a decompression bomb costs a header read.
    package var maximumPixels = 250_000_000

    package init() {}

    package var arguments: [String] {
        ["--address-space", String(addressSpace), "--max-pixels", String(maximumPixels)]
    }

    init(arguments: [String]) {
        func value(_ name: String) -> String? {
            guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
            return arguments[i + 1]
        }
        if let v = value("--address-space").flatMap(UInt64.init) { addressSpace = v }
        if let v = value("--max-pixels").flatMap(Int.init) { maximumPixels = v }
    }
}
