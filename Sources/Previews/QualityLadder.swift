/// The JPEG qualities a PTM-256 thumbnail is tried at: 85, then lower in steps of 5 while
/// the file is over 50 KB, never below 70 (app-catalog.md). At 70 the file is kept
/// whatever its size: a thumbnail a little over is better than none.
package struct QualityLadder: Sendable, Equatable {
    /// The apps' own check is `data.count <= 50_000`.
    package static let sizeLimit = 50_000
    package static let first = 85
    package static let floor = 70
    package static let step = 5

    package init() {}

    /// The quality to try after an encoding at `quality` came out `size` bytes; nil when
    /// that one is kept.
    package func next(after quality: Int, size: Int) -> Int? {
        guard size > Self.sizeLimit, quality > Self.floor else { return nil }
        return max(Self.floor, quality - Self.step)
    }
}
