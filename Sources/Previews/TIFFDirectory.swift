/// The first directory (IFD0) of a TIFF-structured file, read from its first bytes with
/// every offset bounds-checked: enough to tell a camera's RAW from a plain TIFF.
struct TIFFDirectory {
    private let bytes: [UInt8]
    private let little: Bool
    private var entries: [UInt16: (type: UInt16, count: UInt32, value: Int)] = [:]

    init?(_ bytes: [UInt8]) {
        guard bytes.count >= 8 else { return nil }
        self.bytes = bytes
        little = bytes[0] == 0x49
        guard let first = Self.uint32(bytes, 4, littleEndian: little), let count = Self.uint16(bytes, Int(first), littleEndian: little) else { return nil }
        for i in 0..<Int(min(count, 512)) {
            let at = Int(first) + 2 + i * 12
            guard let tag = Self.uint16(bytes, at, littleEndian: little), let type = Self.uint16(bytes, at + 2, littleEndian: little),
                  let n = Self.uint32(bytes, at + 4, littleEndian: little) else { break }
            entries[tag] = (type, n, at + 8)
        }
    }

    func has(tag: UInt16) -> Bool { entries[tag] != nil }

    /// An ASCII value (type 2): inline up to 4 bytes, else at its offset.
    func ascii(tag: UInt16) -> String? {
        guard let e = entries[tag], e.type == 2, e.count > 0, e.count < 4096 else { return nil }
        let start = e.count <= 4 ? e.value : Self.uint32(bytes, e.value, littleEndian: little).map(Int.init) ?? -1
        guard start >= 0, start + Int(e.count) <= bytes.count else { return nil }
        let text = bytes[start..<start + Int(e.count)].prefix { $0 != 0 }
        return String(decoding: text, as: UTF8.self)
    }

    static func uint16(_ b: [UInt8], _ at: Int, littleEndian: Bool) -> UInt16? {
        guard at >= 0, at + 2 <= b.count else { return nil }
        return littleEndian ? UInt16(b[at]) | UInt16(b[at + 1]) << 8 : UInt16(b[at]) << 8 | UInt16(b[at + 1])
    }

    static func uint32(_ b: [UInt8], _ at: Int, littleEndian: Bool) -> UInt32? {
        guard at >= 0, at + 4 <= b.count else { return nil }
        let v = (0..<4).map { UInt32(b[at + $0]) }
        return littleEndian ? v[0] | v[1] << 8 | v[2] << 16 | v[3] << 24 : v[0] << 24 | v[1] << 16 | v[2] << 8 | v[3]
    }
}
