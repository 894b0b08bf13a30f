/// The JPEG qualities a PTM-256 thumbnail is tried at: 85, then lower in steps of 5 while
/// the file is over 50 KB, never below 70 (app-catalog.md). At 70 the file is kept
/// whatever its size: a thumbnail a little over is better than none.
public struct QualityLadder: Sendable, Equatable {
    /// The apps' own check is `data.count <= 50_000`.
    public static let sizeLimit = 50_000
    public static let first = 85
    public static let floor = 70
    public static let step = 5

    public init() {}

    /// The quality to try after an encoding at `quality` came out `size` bytes; nil when
    /// that one is kept.
    public func next(after quality: Int, size: Int) -> Int? {
        guard size > Self.sizeLimit, quality > Self.floor else { return nil }
        return max(Self.floor, quality - Self.step)
    }
}
