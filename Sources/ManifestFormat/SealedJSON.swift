import CZlib

/// The JSON inside a format-2 object (a segment's header, the device record) is sealed as
/// a zlib stream (docs/manifest.md): for a photo backed up alone, the header and the record
/// are most of the bytes written, and deflate halves them. A reader takes either form, told
/// apart by the first byte: `{` for the JSON itself (how the first format-2 writers sealed
/// it), 0x78 for a zlib stream. Records are never deflated: their digests do not compress,
/// and a snapshot's CPU would go to trying.
package enum SealedJSON {
    /// The most a sealed JSON may inflate to: far above any header the daemon writes (a
    /// snapshot index naming 10,000 parts is under 1 MiB), so a stream that grows beyond it
    /// is refused rather than read into memory.
    package static let limit = 16 << 20

    package static func pack(_ json: [UInt8]) -> [UInt8] {
        var size = compressBound(uLong(json.count))
        var out = [UInt8](repeating: 0, count: Int(size))
        let rc = out.withUnsafeMutableBufferPointer { o in
            json.withUnsafeBufferPointer { i in compress2(o.baseAddress, &size, i.baseAddress, uLong(i.count), Z_BEST_COMPRESSION) }
        }
        // compressBound is room enough by zlib's contract, and memory for a few kilobytes of
        // zlib state is the only other way it can fail.
        precondition(rc == Z_OK, "zlib's compress2 failed (\(rc))")
        out.removeLast(out.count - Int(size))
        return out
    }

    /// The JSON's bytes; nil if `bytes` is neither JSON nor one whole zlib stream of at most
    /// `limit` bytes with nothing after it.
    package static func unpack(_ bytes: [UInt8], limit: Int = limit) -> [UInt8]? {
        guard let first = bytes.first else { return nil }
        if first == UInt8(ascii: "{") { return bytes }
        guard first == 0x78 else { return nil }
        var stream = z_stream()
        guard czlib_inflate_init(&stream) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        return bytes.withUnsafeBufferPointer { input -> [UInt8]? in
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
            stream.avail_in = uInt(input.count)
            while true {
                let rc = chunk.withUnsafeMutableBufferPointer { c -> Int32 in
                    stream.next_out = c.baseAddress
                    stream.avail_out = uInt(c.count)
                    return inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                guard out.count + produced <= limit else { return nil }
                out.append(contentsOf: chunk[0..<produced])
                // The stream must end, and end exactly where the bytes do.
                if rc == Z_STREAM_END { return stream.avail_in == 0 ? out : nil }
                // Z_BUF_ERROR: cut short (no input left to go on with); anything else: damaged.
                guard rc == Z_OK else { return nil }
            }
        }
    }
}
