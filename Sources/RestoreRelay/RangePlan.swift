/// How an object is read: whole in one GET when small, or as consecutive ranges of
/// `rangeSize` (the last shorter) read several at a time and relayed in order.
package struct RangePlan: Sendable, Equatable {
    package let ranges: [ClosedRange<Int64>]

    package init(size: Int64, threshold: Int64, rangeSize: Int64) {
        guard size > threshold, rangeSize > 0 else {
            ranges = size > 0 ? [0...(size - 1)] : []
            return
        }
        var out: [ClosedRange<Int64>] = []
        var start: Int64 = 0
        while start < size {
            let end = min(size, start + rangeSize) - 1
            out.append(start...end)
            start = end + 1
        }
        ranges = out
    }

    package var isRanged: Bool { ranges.count > 1 }
}
