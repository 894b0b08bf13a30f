/// What the daemon and the preview worker say to each other over their socket pair.
/// Every message is one frame: a 4-byte big-endian length, then the body. A request
/// carries the photo's descriptor (SCM_RIGHTS) with its first byte. The daemon reads the
/// worker's answers as untrusted bytes: every length is checked against what is left.
package enum WorkerMessage {
    package static let version: UInt8 = 1
    /// A thumbnail is ≤ 50 KB or so; nothing legitimate comes near this.
    package static let maximumFrame = 4 << 20

    /// daemon → worker: read this photo.
    package struct Request: Sendable, Equatable {
        package var format: PhotoFormat
        /// False when a thumbnail is already in the bucket: only the date is wanted.
        package var wantThumbnail: Bool
        package init(format: PhotoFormat, wantThumbnail: Bool) {
            self.format = format
            self.wantThumbnail = wantThumbnail
        }
    }

    /// worker → daemon: what it read, or why it could not.
    package struct Reply: Sendable, Equatable {
        /// Upright size of the source (or of the RAW's preview).
        package var width: Int
        package var height: Int
        package var dateTimeOriginal: String?
        package var offsetTimeOriginal: String?
        package var quality: Int
        package var jpeg: [UInt8]?
        /// Why there is no preview (a sentence for "no preview: …"); nil on success.
        package var failure: String?

        package init(width: Int = 0, height: Int = 0, dateTimeOriginal: String? = nil, offsetTimeOriginal: String? = nil,
                    quality: Int = 0, jpeg: [UInt8]? = nil, failure: String? = nil) {
            self.width = width
            self.height = height
            self.dateTimeOriginal = dateTimeOriginal
            self.offsetTimeOriginal = offsetTimeOriginal
            self.quality = quality
            self.jpeg = jpeg
            self.failure = failure
        }

        package static func failed(_ why: String) -> Reply { Reply(failure: why) }
    }

    package enum DecodeError: Error, Equatable {
        case malformed(String)
    }

    // MARK: bodies

    package static func encode(_ r: Request) -> [UInt8] {
        var w = ByteWriter()
        w.u8(version)
        w.string(r.format.rawValue)
        w.u8(r.wantThumbnail ? 1 : 0)
        return w.bytes
    }

    package static func decodeRequest(_ body: [UInt8]) throws(DecodeError) -> Request {
        var r = ByteReader(body)
        guard try r.u8() == version else { throw .malformed("unknown version") }
        guard let format = PhotoFormat(rawValue: try r.string()) else { throw .malformed("unknown format") }
        let want = try r.u8() == 1
        try r.end()
        return Request(format: format, wantThumbnail: want)
    }

    package static func encode(_ r: Reply) -> [UInt8] {
        var w = ByteWriter()
        w.u8(version)
        w.u32(UInt32(clamping: r.width))
        w.u32(UInt32(clamping: r.height))
        w.optionalString(r.dateTimeOriginal)
        w.optionalString(r.offsetTimeOriginal)
        w.u8(UInt8(clamping: r.quality))
        w.optionalString(r.failure)
        w.u8(r.jpeg == nil ? 0 : 1)
        if let jpeg = r.jpeg { w.blob(jpeg) }
        return w.bytes
    }

    package static func decodeReply(_ body: [UInt8]) throws(DecodeError) -> Reply {
        var r = ByteReader(body)
        guard try r.u8() == version else { throw .malformed("unknown version") }
        var reply = Reply()
        reply.width = Int(try r.u32())
        reply.height = Int(try r.u32())
        reply.dateTimeOriginal = try r.optionalString()
        reply.offsetTimeOriginal = try r.optionalString()
        reply.quality = Int(try r.u8())
        reply.failure = try r.optionalString()
        if try r.u8() == 1 { reply.jpeg = try r.blob() }
        try r.end()
        return reply
    }

    // MARK: frames

    package static func frame(_ body: [UInt8]) -> [UInt8] {
        var w = ByteWriter()
        w.u32(UInt32(body.count))
        return w.bytes + body
    }

    /// Collects bytes as they arrive and hands out whole frames.
    package struct FrameReader: Sendable {
        private var buffer: [UInt8] = []
        package init() {}

        package mutating func append(_ bytes: ArraySlice<UInt8>) { buffer += bytes }

        /// The next whole frame's body, nil while it has not all arrived.
        package mutating func next() throws(DecodeError) -> [UInt8]? {
            guard buffer.count >= 4 else { return nil }
            let length = Int(buffer[0]) << 24 | Int(buffer[1]) << 16 | Int(buffer[2]) << 8 | Int(buffer[3])
            guard length <= maximumFrame else { throw .malformed("a frame of \(length) bytes") }
            guard buffer.count >= 4 + length else { return nil }
            let body = Array(buffer[4..<4 + length])
            buffer.removeFirst(4 + length)
            return body
        }

        package var isEmpty: Bool { buffer.isEmpty }
    }
}

struct ByteWriter {
    var bytes: [UInt8] = []
    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u32(_ v: UInt32) { bytes += [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    mutating func blob(_ b: [UInt8]) { u32(UInt32(b.count)); bytes += b }
    mutating func string(_ s: String) { blob(Array(s.utf8.prefix(4096))) }
    mutating func optionalString(_ s: String?) {
        u8(s == nil ? 0 : 1)
        if let s { string(s) }
    }
}

struct ByteReader {
    private let bytes: [UInt8]
    private var at = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func u8() throws(WorkerMessage.DecodeError) -> UInt8 {
        guard at < bytes.count else { throw .malformed("too short") }
        defer { at += 1 }
        return bytes[at]
    }
    mutating func u32() throws(WorkerMessage.DecodeError) -> UInt32 {
        guard at + 4 <= bytes.count else { throw .malformed("too short") }
        defer { at += 4 }
        return UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }
    mutating func blob() throws(WorkerMessage.DecodeError) -> [UInt8] {
        let n = Int(try u32())
        guard n <= bytes.count - at else { throw .malformed("a field longer than its frame") }
        defer { at += n }
        return Array(bytes[at..<at + n])
    }
    mutating func string() throws(WorkerMessage.DecodeError) -> String {
        let b = try blob()
        guard b.count <= 4096 else { throw .malformed("a string of \(b.count) bytes") }
        return String(decoding: b, as: UTF8.self)
    }
    mutating func optionalString() throws(WorkerMessage.DecodeError) -> String? {
        try u8() == 1 ? try string() : nil
    }
    func end() throws(WorkerMessage.DecodeError) {
        guard at == bytes.count else { throw .malformed("\(bytes.count - at) bytes after the end") }
    }
}
