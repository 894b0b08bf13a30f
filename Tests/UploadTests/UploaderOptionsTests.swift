import PhotolalaCore
import Testing
import Upload

@Suite struct UploaderOptionsTests {
    @Test func mapsTheUploadSectionAndTheLinkRule() {
        var s = Settings()
        s.upload.concurrency = 7
        s.upload.multipartThreshold = 100 << 20
        s.upload.partSize = 8 << 20
        s.upload.storageClass = "DEEP_ARCHIVE"
        s.watch.followSymlinks = true
        let o = UploaderService.Options(s)
        #expect(o.concurrency == 7)
        #expect(o.multipartThreshold == 100 << 20)
        #expect(o.partSize == 8 << 20)
        #expect(o.storageClass == "DEEP_ARCHIVE")
        #expect(o.followSymlinks)
    }

    @Test func tlsCAFileBecomesTheTrustOfEveryRequest() {
        var s = Settings()
        #expect(UploaderService.Options(s).trust.caFile == nil)
        s.tls.caFile = "/etc/photolala/private-ca.pem"
        let o = UploaderService.Options(s)
        #expect(o.trust.caFile == "/etc/photolala/private-ca.pem")
        #expect(o != UploaderService.Options(Settings()))
    }

    @Test func theDefaultsAreConfigMd() {
        let o = UploaderService.Options(Settings())
        #expect(o.concurrency == 4 && o.multipartThreshold == 64 << 20 && o.partSize == 16 << 20)
        #expect(o.storageClass == "STANDARD" && !o.followSymlinks)
    }
}
