/// Where a PTM-256 thumbnail's pixels come from (app-catalog.md): the upright image scaled
/// so its short edge is exactly 256, then, if the long edge is over 512, cropped to 512 —
/// a landscape evenly from both sides, a portrait 40 % of the excess from the top and 60 %
/// from the bottom, so faces stay in frame.
package struct ThumbnailGeometry: Sendable, Equatable {
    package static let shortEdge = 256
    package static let longEdge = 512
    /// Past this scaled long edge the scaled image is not made whole: the kept part of the
    /// source is cut first (a 1:100 strip would be 256 × 25,600 pixels).
    package static let largestScaledEdge = 4096

    package struct Rect: Sendable, Equatable {
        package var x, y, width, height: Int
        package init(x: Int, y: Int, width: Int, height: Int) {
            self.x = x; self.y = y; self.width = width; self.height = height
        }
    }

    /// The whole upright image scaled to this size.
    package var scaledWidth: Int
    package var scaledHeight: Int
    /// The part of the scaled image kept: the thumbnail's size.
    package var crop: Rect
    /// The same part in the upright source's pixels.
    package var source: Rect
    /// Cut `source` first, then scale it to `crop`'s size, instead of scaling the whole image.
    package var direct: Bool

    /// For an upright image of `width` × `height` pixels (orientation already applied).
    package init(width: Int, height: Int) {
        let w = max(1, width), h = max(1, height)
        let short = min(w, h)
        let scale = Double(Self.shortEdge) / Double(short)
        scaledWidth = w == short ? Self.shortEdge : max(Self.shortEdge, Int((Double(w) * scale).rounded()))
        scaledHeight = h == short ? Self.shortEdge : max(Self.shortEdge, Int((Double(h) * scale).rounded()))
        if scaledWidth > Self.longEdge {
            let excess = scaledWidth - Self.longEdge
            crop = Rect(x: excess / 2, y: 0, width: Self.longEdge, height: scaledHeight)
        } else if scaledHeight > Self.longEdge {
            let excess = scaledHeight - Self.longEdge
            crop = Rect(x: 0, y: Int((Double(excess) * 0.4).rounded()), width: scaledWidth, height: Self.longEdge)
        } else {
            crop = Rect(x: 0, y: 0, width: scaledWidth, height: scaledHeight)
        }
        // The crop mapped back onto the source, clamped to it.
        let sx = Double(w) / Double(scaledWidth), sy = Double(h) / Double(scaledHeight)
        let x0 = min(w - 1, Int((Double(crop.x) * sx).rounded())), y0 = min(h - 1, Int((Double(crop.y) * sy).rounded()))
        let x1 = min(w, max(x0 + 1, Int((Double(crop.x + crop.width) * sx).rounded())))
        let y1 = min(h, max(y0 + 1, Int((Double(crop.y + crop.height) * sy).rounded())))
        source = Rect(x: x0, y: y0, width: x1 - x0, height: y1 - y0)
        direct = max(scaledWidth, scaledHeight) > Self.largestScaledEdge
    }

    /// The size of an image of `width` × `height` stored pixels once its EXIF orientation
    /// (1…8) is applied: 5 to 8 turn it a quarter.
    package static func upright(width: Int, height: Int, orientation: Int) -> (width: Int, height: Int) {
        (5...8).contains(orientation) ? (height, width) : (width, height)
    }
}
