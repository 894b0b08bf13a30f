import Testing
import Previews

/// Quality 85, then 80, 75, 70 while over 50 KB; 70 is kept whatever its size.
@Suite struct QualityLadderTests {
    let ladder = QualityLadder()

    @Test func smallEnoughIsKeptAtOnce() {
        #expect(ladder.next(after: 85, size: 50_000) == nil)
        #expect(ladder.next(after: 85, size: 12_000) == nil)
    }

    @Test func tooBigStepsDownByFive() {
        #expect(ladder.next(after: 85, size: 50_001) == 80)
        #expect(ladder.next(after: 80, size: 60_000) == 75)
        #expect(ladder.next(after: 75, size: 60_000) == 70)
    }

    @Test func seventyIsTheFloor() {
        #expect(ladder.next(after: 70, size: 90_000) == nil)
        #expect(ladder.next(after: 72, size: 90_000) == 70)
    }

    @Test func theWholeLadderIsAtMostFourEncodings() {
        var tried = [QualityLadder.first]
        while let q = ladder.next(after: tried.last!, size: 1 << 20) { tried.append(q) }
        #expect(tried == [85, 80, 75, 70])
    }
}
