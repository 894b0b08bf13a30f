import ManifestFormat
import Testing
import Mirror

@Suite struct MirrorNamingTests {
    let md5 = MD5Value(hex: "1a2b3c4d5e6f70819293a4b5c6d7e8f9")!

    @Test func theExportsNamesThenTheWholeMD5ThenNumbers() {
        let t: Int64 = 1_700_000_000  // 2023-11-14 22:13:20 UTC
        #expect(MirrorNaming.candidate(0, seconds: t, md5: md5, ext: "heic") == "2023/11/2023-11-14 22.13.20 1a2b3c4d.heic")
        #expect(MirrorNaming.candidate(1, seconds: t, md5: md5, ext: "heic") == "2023/11/2023-11-14 22.13.20 1a2b3c4d5e6f70819293a4b5c6d7e8f9.heic")
        #expect(MirrorNaming.candidate(2, seconds: t, md5: md5, ext: "heic") == "2023/11/2023-11-14 22.13.20 1a2b3c4d5e6f70819293a4b5c6d7e8f9-2.heic")
        #expect(MirrorNaming.candidate(0, seconds: t, md5: md5, ext: "exe") == "2023/11/2023-11-14 22.13.20 1a2b3c4d.bin", "only the export's extensions")
        #expect(MirrorNaming.folder(seconds: t) == "2023/11")
    }

    @Test func trashKeepsTheRelativePath() {
        #expect(MirrorNaming.trash("2023/11/a.jpg", attempt: 1) == ".trash/2023/11/a.jpg")
        #expect(MirrorNaming.trash("2023/11/a.jpg", attempt: 3) == ".trash/2023/11/a-3.jpg")
        #expect(MirrorNaming.numbered("noext", 2) == "noext-2")
    }

    @Test func onlyItsOwnTemporaryFilesAreTheMirrors() {
        let name = MirrorNaming.temporaryName(md5)
        #expect(name == ".plmirror-1a2b3c4d5e6f70819293a4b5c6d7e8f9.tmp")
        #expect(MirrorNaming.isTemporary(name))
        #expect(!MirrorNaming.isTemporary(".plmirror-notanmd5.tmp"))
        #expect(!MirrorNaming.isTemporary(".plrestore-0123456789abcdef.tmp"), "a restore's temporary file is not the mirror's to remove")
        #expect(!MirrorNaming.isTemporary("IMG_0001.jpg"))
    }
}
