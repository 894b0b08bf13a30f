import Foundation

/// How the daemon hands a manifest to the command: one frame per checked segment, then a
/// report. A frame is a type byte ('S' a format-1 segment, 'P' the plaintext of a format-2
/// segment the daemon opened and checked, 'R' the report as JSON), a big-endian 32-bit
/// length and that many bytes. A stream without its report was cut short. The command
/// reads every segment again as untrusted bytes: the daemon decrypts, the command distrusts.
package enum ManifestFrames {
    package static func segment(_ bytes: [UInt8]) -> [UInt8] { frame(UInt8(ascii: "S"), bytes) }
    package static func plaintext(_ bytes: [UInt8]) -> [UInt8] { frame(UInt8(ascii: "P"), bytes) }

    package static func report(_ report: ManifestReader.Report) -> [UInt8] {
        frame(UInt8(ascii: "R"), Array((try? JSONEncoder().encode(report)) ?? Data()))
    }

    static func frame(_ type: UInt8, _ payload: [UInt8]) -> [UInt8] {
        let n = UInt32(payload.count)
        return [type, UInt8(n >> 24), UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n)] + payload
    }

    package enum Frame: Equatable {
        case segment([UInt8])
        case plaintext([UInt8])
        case report(ManifestReader.Report)
    }

    package enum FrameError: Error, Equatable { case badFrame, tooLarge }

    /// Collects frames from bytes fed in arbitrary pieces.
    package struct Reader {
        private var buffer: [UInt8] = []
        private var start = 0
        package let maxFrame: Int

        package init(maxFrame: Int = 64 << 20) {
            self.maxFrame = maxFrame
        }

        package mutating func feed(_ bytes: UnsafeRawBufferPointer) throws -> [Frame] {
            buffer.append(contentsOf: bytes)
            var frames: [Frame] = []
            while buffer.count - start >= 5 {
                let type = buffer[start]
                let n = buffer[(start + 1)..<(start + 5)].reduce(0) { $0 << 8 | Int($1) }
                guard n <= maxFrame else { throw FrameError.tooLarge }
                guard buffer.count - start >= 5 + n else { break }
                let payload = Array(buffer[(start + 5)..<(start + 5 + n)])
                start += 5 + n
                switch type {
                case UInt8(ascii: "S"): frames.append(.segment(payload))
                case UInt8(ascii: "P"): frames.append(.plaintext(payload))
                case UInt8(ascii: "R"):
                    guard let r = try? JSONDecoder().decode(ManifestReader.Report.self, from: Data(payload)) else { throw FrameError.badFrame }
                    frames.append(.report(r))
                default: throw FrameError.badFrame
                }
            }
            if start > 1 << 20 {
                buffer.removeFirst(start)
                start = 0
            }
            return frames
        }
    }
}
