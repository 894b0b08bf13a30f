#if canImport(Glibc)
import Glibc
#endif
import CPreviews

/// Inside the worker: one photo's header, date and PTM-256 thumbnail, through libvips
/// (LibRaw for a RAW's embedded preview, `BMPDecoder` for BMP).
struct PreviewRenderer {
    var limits: PreviewLimits

    func read(fd: Int32, _ request: WorkerMessage.Request) -> WorkerMessage.Reply {
        var error = [CChar](repeating: 0, count: 512)
        var header = ptm_header()
        let opened: OpaquePointer?
        if request.format == .bmp {
            switch BMPDecoder.decode(fd: fd, maximumPixels: limits.maximumPixels) {
            case .failure(let why): return .failed(why.description)
            case .success(let bitmap):
                opened = bitmap.rgb.withUnsafeBufferPointer {
                    ptm_open_pixels($0.baseAddress, Int32(bitmap.width), Int32(bitmap.height), &error, error.count)
                }
                header.width = Int32(bitmap.width)
                header.height = Int32(bitmap.height)
                header.orientation = 1
            }
        } else {
            guard let kind = Self.kind(request.format) else { return .failed("\(request.format.rawValue) is not read for previews") }
            opened = ptm_open(fd, kind, &header, &error, error.count)
        }
        guard let image = opened else { return .failed(CText.string(error)) }
        defer { ptm_close(image) }

        let upright = ThumbnailGeometry.upright(width: Int(header.width), height: Int(header.height), orientation: Int(header.orientation))
        var reply = WorkerMessage.Reply(width: upright.width, height: upright.height,
                                        dateTimeOriginal: Self.text(header.date_time_original),
                                        offsetTimeOriginal: Self.text(header.offset_time_original))
        let pixels = upright.width.multipliedReportingOverflow(by: upright.height)
        if pixels.overflow || pixels.partialValue > limits.maximumPixels {
            reply.failure = "the image declares \(upright.width) × \(upright.height) pixels, more than the \(limits.maximumPixels / 1_000_000) megapixels previews are made from"
            return reply
        }
        guard request.wantThumbnail else { return reply }

        let g = ThumbnailGeometry(width: upright.width, height: upright.height)
        var geometry = ptm_geometry(
            scaled_width: Int32(g.scaledWidth), scaled_height: Int32(g.scaledHeight),
            crop_x: Int32(g.crop.x), crop_y: Int32(g.crop.y), crop_width: Int32(g.crop.width), crop_height: Int32(g.crop.height),
            direct: g.direct || request.format == .bmp ? 1 : 0,
            source_x: Int32(g.source.x), source_y: Int32(g.source.y), source_width: Int32(g.source.width), source_height: Int32(g.source.height))
        guard ptm_render(image, &geometry, &error, error.count) == 0 else {
            reply.failure = CText.string(error)
            return reply
        }
        let ladder = QualityLadder()
        var quality = QualityLadder.first
        while true {
            var buffer: UnsafeMutableRawPointer?
            var length = 0
            guard ptm_encode(image, Int32(quality), &buffer, &length, &error, error.count) == 0, let buffer else {
                reply.failure = CText.string(error)
                return reply
            }
            let jpeg = [UInt8](UnsafeRawBufferPointer(start: buffer, count: length))
            ptm_free_buffer(buffer)
            if let lower = ladder.next(after: quality, size: length) {
                quality = lower
                continue
            }
            reply.jpeg = jpeg
            reply.quality = quality
            return reply
        }
    }

    static func kind(_ format: PhotoFormat) -> Int32? {
        switch format {
        case .jpeg: Int32(PTM_JPEG)
        case .png: Int32(PTM_PNG)
        case .gif: Int32(PTM_GIF)
        case .webp: Int32(PTM_WEBP)
        case .tiff: Int32(PTM_TIFF)
        case .heif: Int32(PTM_HEIF)
        case .cr2, .nef, .arw, .dng, .orf, .raf: Int32(PTM_RAW)
        default: nil
        }
    }

    static func text<T>(_ tuple: T) -> String? {
        let s = withUnsafeBytes(of: tuple) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        return s.isEmpty ? nil : s
    }
}

/// A C buffer's text up to its first NUL.
enum CText {
    static func string(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
