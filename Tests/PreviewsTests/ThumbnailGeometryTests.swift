import Testing
import Previews

/// PTM-256's size and crop (app-catalog.md), as plain numbers.
@Suite struct ThumbnailGeometryTests {
    typealias Rect = ThumbnailGeometry.Rect

    @Test func aLandscapeUnderTwoToOneIsOnlyScaled() {
        let g = ThumbnailGeometry(width: 4032, height: 3024)
        #expect((g.scaledWidth, g.scaledHeight) == (341, 256))
        #expect(g.crop == Rect(x: 0, y: 0, width: 341, height: 256))
        #expect(!g.direct)
    }

    @Test func aWideLandscapeLosesItsExcessEvenlyFromBothSides() {
        let g = ThumbnailGeometry(width: 1200, height: 300)
        #expect((g.scaledWidth, g.scaledHeight) == (1024, 256))
        #expect(g.crop == Rect(x: 256, y: 0, width: 512, height: 256))
        #expect(g.source == Rect(x: 300, y: 0, width: 600, height: 300))
    }

    @Test func aTallPortraitLosesFortyPercentFromTheTopAndSixtyFromTheBottom() {
        let g = ThumbnailGeometry(width: 300, height: 1200)
        #expect((g.scaledWidth, g.scaledHeight) == (256, 1024))
        // 512 rows too many: 204.8 → 205 off the top, 307 off the bottom.
        #expect(g.crop == Rect(x: 0, y: 205, width: 256, height: 512))
        #expect(g.scaledHeight - g.crop.y - g.crop.height == 307)
        #expect(g.source.y == 240 && g.source.height == 600)
    }

    @Test func anOddExcessRoundsTheBiasAndKeeps512() {
        let g = ThumbnailGeometry(width: 1000, height: 2003)   // 256 × 513: one row too many
        #expect(g.crop.height == 512 && g.crop.y == 0)
        let h = ThumbnailGeometry(width: 1000, height: 2010)   // 256 × 515: three rows
        #expect(h.crop.y == 1 && h.crop.height == 512)
    }

    @Test func smallPhotosAreScaledUpAndSquaresStaySquare() {
        let small = ThumbnailGeometry(width: 100, height: 80)
        #expect((small.scaledWidth, small.scaledHeight) == (320, 256))
        let square = ThumbnailGeometry(width: 5000, height: 5000)
        #expect(square.crop == Rect(x: 0, y: 0, width: 256, height: 256))
    }

    @Test func exactlyTwoToOneIsNotCropped() {
        let g = ThumbnailGeometry(width: 2048, height: 1024)
        #expect(g.crop == Rect(x: 0, y: 0, width: 512, height: 256))
    }

    @Test func anExtremeStripIsCutBeforeItIsScaled() {
        let g = ThumbnailGeometry(width: 100, height: 10_000)
        #expect(g.direct)
        #expect(g.crop.width == 256 && g.crop.height == 512)
        #expect(g.source.width == 100 && g.source.height == 200)
        #expect(g.source.y == Int((Double(g.crop.y) * 10_000 / Double(g.scaledHeight)).rounded()))
    }

    @Test func quarterTurnsSwapTheSides() {
        #expect(ThumbnailGeometry.upright(width: 4000, height: 3000, orientation: 6) == (3000, 4000))
        #expect(ThumbnailGeometry.upright(width: 4000, height: 3000, orientation: 8) == (3000, 4000))
        #expect(ThumbnailGeometry.upright(width: 4000, height: 3000, orientation: 3) == (4000, 3000))
        #expect(ThumbnailGeometry.upright(width: 4000, height: 3000, orientation: 1) == (4000, 3000))
    }
}
