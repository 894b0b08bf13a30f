#if canImport(Glibc)
import Glibc
#endif
import PhotolalaCore

/// BMP, decoded here because libvips reads it only through ImageMagick (a large, lazily
/// loading library we keep out of the worker). Uncompressed 1-, 4-, 8-, 24- and 32-bit
/// and 16/32-bit bit-field files, bottom-up or top-down; every offset is bounds-checked.
/// Runs in the sandboxed worker like every other decoder.
package enum BMPDecoder {
    package struct Bitmap {
        package var width: Int
        package var height: Int
        /// Three bytes a pixel, rows top to bottom.
        package var rgb: [UInt8]
    }

    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    static func decode(fd: Int32, maximumPixels: Int) -> Result<Bitmap, Failure> {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .failure(Failure(description: "cannot read the file")) }
        let limit = Int64(maximumPixels) * 4 + 65_536
        guard st.st_size <= limit else { return .failure(Failure(description: "the BMP is larger than a \(maximumPixels / 1_000_000)-megapixel image can be")) }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var offset = 0
        while offset < bytes.count {
            let n = retryingInterrupts { bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + offset, $0.count - offset, off_t(offset)) } }
            guard n > 0 else { return .failure(Failure(description: "the file ended early")) }
            offset += n
        }
        return decode(bytes, maximumPixels: maximumPixels)
    }

    package static func decode(_ b: [UInt8], maximumPixels: Int) -> Result<Bitmap, Failure> {
        func fail(_ why: String) -> Result<Bitmap, Failure> { .failure(Failure(description: "not a BMP this reader knows: \(why)")) }
        func u16(_ at: Int) -> Int? { at >= 0 && at + 2 <= b.count ? Int(b[at]) | Int(b[at + 1]) << 8 : nil }
        func u32(_ at: Int) -> Int? { at >= 0 && at + 4 <= b.count ? Int(b[at]) | Int(b[at + 1]) << 8 | Int(b[at + 2]) << 16 | Int(b[at + 3]) << 24 : nil }
        guard b.count >= 26, b[0] == 0x42, b[1] == 0x4D, let dataOffset = u32(10), let headerSize = u32(14) else { return fail("no header") }
        guard headerSize >= 40, let w = u32(18), let rawH = u32(22), let bits = u16(28), let compression = u32(30) else { return fail("an OS/2 header") }
        let signedH = rawH >= 0x8000_0000 ? rawH - 0x1_0000_0000 : rawH
        let width = w, height = abs(signedH), topDown = signedH < 0
        guard width > 0, height > 0, width <= 1 << 24, height <= 1 << 24 else { return fail("\(width) × \(height) pixels") }
        guard width * height <= maximumPixels else {
            return .failure(Failure(description: "the image declares \(width) × \(height) pixels, more than the \(maximumPixels / 1_000_000) megapixels previews are made from"))
        }
        var masks: (r: Int, g: Int, b: Int)? = nil
        switch (compression, bits) {
        case (0, 1), (0, 4), (0, 8), (0, 24), (0, 32): break
        case (0, 16): masks = (0x7C00, 0x03E0, 0x001F)
        case (3, 16), (3, 32):
            guard let r = u32(54), let g = u32(58), let bl = u32(62) else { return fail("bit fields missing") }
            masks = (r, g, bl)
        default: return fail("compression \(compression) with \(bits) bits a pixel")
        }
        var palette: [(UInt8, UInt8, UInt8)] = []
        if bits <= 8 {
            let colours = min(1 << bits, (u32(46) ?? 0) == 0 ? 1 << bits : u32(46)!)
            for i in 0..<colours {
                let at = 14 + headerSize + i * 4
                guard at + 3 <= b.count else { return fail("the palette is cut short") }
                palette.append((b[at + 2], b[at + 1], b[at]))
            }
        }
        let stride = ((width * bits + 31) / 32) * 4
        guard dataOffset >= 0, dataOffset + stride * height <= b.count else { return fail("the pixels are cut short") }
        var rgb = [UInt8](repeating: 0, count: width * height * 3)
        func channel(_ value: Int, _ mask: Int) -> UInt8 {
            guard mask != 0 else { return 0 }
            let shift = mask.trailingZeroBitCount
            let top = (mask >> shift)
            return UInt8(((value & mask) >> shift) * 255 / top)
        }
        for row in 0..<height {
            let src = dataOffset + (topDown ? row : height - 1 - row) * stride
            var out = row * width * 3
            for x in 0..<width {
                let pixel: (UInt8, UInt8, UInt8)
                switch bits {
                case 24: pixel = (b[src + x * 3 + 2], b[src + x * 3 + 1], b[src + x * 3])
                case 32 where masks == nil: pixel = (b[src + x * 4 + 2], b[src + x * 4 + 1], b[src + x * 4])
                case 16, 32:
                    let n = bits / 8
                    var v = 0
                    for k in 0..<n { v |= Int(b[src + x * n + k]) << (8 * k) }
                    let m = masks!
                    pixel = (channel(v, m.r), channel(v, m.g), channel(v, m.b))
                default:
                    let perByte = 8 / bits
                    let byte = Int(b[src + x / perByte])
                    let index = (byte >> ((perByte - 1 - x % perByte) * bits)) & ((1 << bits) - 1)
                    pixel = index < palette.count ? palette[index] : (0, 0, 0)
                }
                rgb[out] = pixel.0; rgb[out + 1] = pixel.1; rgb[out + 2] = pixel.2
                out += 3
            }
        }
        return .success(Bitmap(width: width, height: height, rgb: rgb))
    }
}
