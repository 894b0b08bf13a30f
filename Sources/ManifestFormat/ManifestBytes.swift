/// The manifest's binary primitives: unsigned LEB128 varints, zigzag for signed ones,
/// big-endian fixed widths. Every reader in docs/manifest.md needs exactly these.
package struct ManifestByteWriter {
    package var bytes: [UInt8] = []

    package init() {}

    package mutating func uvarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    package mutating func svarint(_ value: Int64) {
        uvarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    package mutating func u32(_ value: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    package mutating func append(_ other: some Sequence<UInt8>) {
        bytes.append(contentsOf: other)
    }
}

package struct ManifestByteReader {
    let bytes: [UInt8]
    var offset: Int

    package init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    package var atEnd: Bool { offset >= bytes.count }

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// nil past the end, or for a varint longer than 64 bits.
    package mutating func uvarint() -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while let b = byte() {
            if shift == 63 && b > 1 { return nil }
            value |= UInt64(b & 0x7f) << shift
            if b < 0x80 { return value }
            shift += 7
            if shift > 63 { return nil }
        }
        return nil
    }

    package mutating func svarint() -> Int64? {
        guard let u = uvarint() else { return nil }
        return Int64(bitPattern: (u >> 1) ^ (0 &- (u & 1)))
    }

    package mutating func u32() -> UInt32? {
        guard offset + 4 <= bytes.count else { return nil }
        defer { offset += 4 }
        return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, offset + count <= bytes.count else { return nil }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }
}
