import Testing
import PhotolalaCore

@Suite struct PartPlanTests {
    @Test func singlePutUpToTheThreshold() {
        #expect(PartPlan(fileSize: 64 << 20, multipartThreshold: 64 << 20, configuredPartSize: 16 << 20).partSize == nil)
        #expect(PartPlan(fileSize: 0, multipartThreshold: 64 << 20, configuredPartSize: 16 << 20).partCount == 1)
    }

    @Test func partsAboveTheThreshold() {
        let p = PartPlan(fileSize: (64 << 20) + 1, multipartThreshold: 64 << 20, configuredPartSize: 16 << 20)
        #expect(p.partSize == 16 << 20)
        #expect(p.partCount == 5)
        #expect(p.range(ofPart: 5) == (64 << 20, 1))
    }

    @Test func sparseSixGiBFileFitsInTenThousandParts() {
        let size: Int64 = 6 << 30
        let p = PartPlan(fileSize: size, multipartThreshold: 64 << 20, configuredPartSize: 5 << 20)
        #expect(p.partCount <= 10_000)
        #expect(p.partSize! >= 5 << 20)
        #expect(p.partSize! % (1 << 20) == 0)
        let last = p.range(ofPart: p.partCount)
        #expect(last.offset + last.length == size)
    }

    @Test func hugeFileGrowsThePartSize() {
        let size: Int64 = 1 << 40  // 1 TiB
        let p = PartPlan(fileSize: size, multipartThreshold: 64 << 20, configuredPartSize: 16 << 20)
        #expect(p.partCount <= 10_000)
        #expect(p.partSize! > 16 << 20)
    }

    @Test func neverBelowFiveMiB() {
        let p = PartPlan(fileSize: 100 << 20, multipartThreshold: 5 << 20, configuredPartSize: 1 << 20)
        #expect(p.partSize == 5 << 20)
    }

    @Test func mediaTypes() {
        #expect(MediaType.forPath("/a/IMG_1.HEIC") == MediaType(contentType: "image/heif", originalFormat: "HEIF"))
        #expect(MediaType.forPath("/a/b.cr3").originalFormat == "RAW-CR3")
        #expect(MediaType.forPath("/a/clip.MOV").contentType == "video/quicktime")
        #expect(MediaType.forPath("/a/noext") == .unknown)
        #expect(MediaType.forPath("/a/x.xyz").originalFormat == "UNKNOWN")
    }
}
