/// How a file is cut for upload (s3-layout.md "Size rules"): one PUT up to the threshold,
/// otherwise parts of `part_size`, grown (in whole MiB) so no file needs more than 10,000
/// parts, never below 5 MiB except the last.
package struct PartPlan: Sendable, Equatable {
    package static let minimumPartSize: Int64 = 5 << 20
    package static let maximumParts: Int64 = 10_000
    package static let maximumObjectSize: Int64 = 5 << 40

    package var fileSize: Int64
    /// nil: a single PUT.
    package var partSize: Int64?

    package init(fileSize: Int64, multipartThreshold: Int64, configuredPartSize: Int64) {
        self.fileSize = fileSize
        guard fileSize > multipartThreshold || fileSize > (5 << 30) else {
            partSize = nil
            return
        }
        var size = max(Self.minimumPartSize, configuredPartSize)
        let needed = (fileSize + Self.maximumParts - 1) / Self.maximumParts
        if needed > size {
            let mib: Int64 = 1 << 20
            size = (needed + mib - 1) / mib * mib
        }
        partSize = size
    }

    package var partCount: Int {
        guard let partSize else { return 1 }
        return Int(max(1, (fileSize + partSize - 1) / partSize))
    }

    /// Offset and length of part `number` (1-based).
    package func range(ofPart number: Int) -> (offset: Int64, length: Int64) {
        guard let partSize else { return (0, fileSize) }
        let offset = Int64(number - 1) * partSize
        return (offset, min(partSize, fileSize - offset))
    }
}
