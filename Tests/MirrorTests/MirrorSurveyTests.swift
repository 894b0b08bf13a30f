import Testing
import Mirror

@Suite struct MirrorSurveyTests {
    /// Adoption reads a chunk of files at once: at most 256 of them, and past the first,
    /// at most 256 MB, so a stop waits for one chunk, not a folder of videos.
    @Test func adoptionChunksAreBoundedByCountAndBytes() {
        #expect(MirrorSurvey.adoptionChunks([]) == [])
        #expect(MirrorSurvey.adoptionChunks(Array(repeating: 1_000, count: 600)) == [0..<256, 256..<512, 512..<600])
        let mb: Int64 = 1 << 20
        #expect(MirrorSurvey.adoptionChunks([100 * mb, 100 * mb, 100 * mb, 10 * mb]) == [0..<2, 2..<4])
        // One file larger than the bound is a chunk of its own, never left out.
        #expect(MirrorSurvey.adoptionChunks([1 << 30, 5, 1 << 30]) == [0..<1, 1..<2, 2..<3])
        #expect(MirrorSurvey.adoptionChunks([5, 6, 7], files: 2, bytes: 100) == [0..<2, 2..<3])
        // Every file in exactly one chunk, in order.
        let sizes = (0..<1_000).map { Int64(($0 * 7_919) % 9_000_000) }
        #expect(MirrorSurvey.adoptionChunks(sizes).flatMap { Array($0) } == Array(0..<1_000))
    }
}
