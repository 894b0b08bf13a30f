import Testing
import Watcher

@Suite struct PathFilterTests {
    let filter = PathFilter(extensions: WatcherOptions.defaultExtensions, exclude: [])

    @Test(arguments: [
        ".DS_Store", ".Trash-1000", ".hidden.jpg", ".", ".SynologyWorkingDirectory",
        "@eaDir", "@__thumb", "#recycle", "#snapshot", "@Recycle", "@Recently-Snapshot",
        "$RECYCLE.BIN", "$Recycle.Bin", "lost+found", "Thumbs.db", "thumbs.db", "desktop.ini", "Desktop.ini",
        "SYNOFILE_THUMB_XL.jpg", "SYNOFILE_THUMB_M.jpg",
    ])
    func builtInNamesAreExcludedForFilesAndDirectories(name: String) {
        #expect(filter.isExcluded(name: name))
        #expect(!filter.accepts(directoryName: name))
        #expect(!filter.accepts(fileName: name))
    }

    @Test(arguments: [
        "IMG_1.jpg.part", "IMG_1.jpg.partial", "IMG_1.jpg.tmp", "IMG_1.jpg.crdownload",
        "IMG_1.jpg.download", "IMG_1.jpg~", "IMG_1.JPG.PART",
    ])
    func partialFilesAreExcluded(name: String) {
        #expect(!filter.accepts(fileName: name))
    }

    @Test func partialRulesAreForFilesOnly() {
        // A directory named like a partial file can hold finished photos.
        #expect(filter.accepts(directoryName: "import.tmp"))
        #expect(filter.accepts(directoryName: "2024~old"))
    }

    @Test func partialSuffixesWinEvenWhenTheExtensionIsListed() {
        let everything = PathFilter(extensions: ["tmp", "part", "jpg"], exclude: [])
        #expect(!everything.accepts(fileName: "a.tmp"))
        #expect(!everything.accepts(fileName: "a.part"))
        #expect(everything.accepts(fileName: "a.jpg"))
    }

    @Test func ordinaryNamesPass() {
        #expect(filter.accepts(directoryName: "2024"))
        #expect(filter.accepts(directoryName: "Holiday @ Sea #2"))
        #expect(filter.accepts(directoryName: "eaDir"))
        #expect(filter.accepts(fileName: "IMG_0001.JPG"))
        #expect(filter.accepts(fileName: "thumbs.db.jpg"))
        #expect(filter.accepts(fileName: "été 2024.heic"))
        #expect(filter.accepts(fileName: "recycle.png"))
    }

    @Test(arguments: ["a.jpg", "a.JPG", "a.Jpeg", "b.HEIC", "c.heif", "d.Cr3", "e.DNG", "f.MoV", "g.mp4", "x.y.tiff"])
    func extensionsMatchIgnoringCase(name: String) {
        #expect(filter.accepts(fileName: name))
    }

    @Test(arguments: ["notes.txt", "a.xmp", "jpg", "a.", "a.jpgx", "a.jp", "IMG.jpg.bak", "archive.zip"])
    func otherExtensionsAreIgnored(name: String) {
        #expect(!filter.accepts(fileName: name))
    }

    @Test func userExtensionsAreLowerCased() {
        let custom = PathFilter(extensions: ["JPG", "Avif"], exclude: [])
        #expect(custom.accepts(fileName: "a.jpg"))
        #expect(custom.accepts(fileName: "a.AVIF"))
        #expect(!custom.accepts(fileName: "a.png"))
    }

    @Test func anEmptyExtensionListAcceptsEveryExtension() {
        let all = PathFilter(extensions: [], exclude: [])
        #expect(all.accepts(fileName: "README"))
        #expect(all.accepts(fileName: "a.xyz"))
        #expect(!all.accepts(fileName: ".hidden"))
        #expect(!all.accepts(fileName: "a.part"))
    }

    @Test func userGlobsApplyToNamesAtAnyDepth() {
        let globs = PathFilter(extensions: WatcherOptions.defaultExtensions, exclude: ["*.bak.jpg", "Private*", "tmp-??", "[Ss]creenshot*"])
        #expect(!globs.accepts(fileName: "x.bak.jpg"))
        #expect(globs.accepts(fileName: "x.jpg"))
        #expect(!globs.accepts(directoryName: "Private Stuff"))
        #expect(globs.accepts(directoryName: "private stuff"), "globs are case-sensitive, like fnmatch")
        #expect(!globs.accepts(directoryName: "tmp-01"))
        #expect(globs.accepts(directoryName: "tmp-001"))
        #expect(!globs.accepts(fileName: "Screenshot 1.png"))
        #expect(!globs.accepts(fileName: "screenshot 2.png"))
    }

    @Test func wholePathsAreCheckedComponentByComponent() {
        let globs = PathFilter(extensions: WatcherOptions.defaultExtensions, exclude: ["Private"])
        #expect(globs.accepts(filePath: "/srv/photos/2024/a.jpg", under: "/srv/photos"))
        #expect(globs.accepts(filePath: "/srv/photos/a.jpg", under: "/srv/photos/"))
        #expect(!globs.accepts(filePath: "/srv/photos/@eaDir/a.jpg", under: "/srv/photos"))
        #expect(!globs.accepts(filePath: "/srv/photos/x/Private/a.jpg", under: "/srv/photos"))
        #expect(!globs.accepts(filePath: "/srv/photos/.cache/a.jpg", under: "/srv/photos"))
        #expect(!globs.accepts(filePath: "/srv/other/a.jpg", under: "/srv/photos"))
        #expect(!globs.accepts(filePath: "/srv/photos/a.txt", under: "/srv/photos"))
    }

    @Test func invalidUTF8NamesAreRejectedNotCrashed() {
        let bytes: [CChar] = [0x61, CChar(bitPattern: 0xFF), 0x2E, 0x6A, 0x70, 0x67, 0]
        bytes.withUnsafeBufferPointer { buffer in
            #expect(PathFilter.name(fromCString: buffer.baseAddress!) == nil)
            #expect(PathFilter.lossyName(fromCString: buffer.baseAddress!) == "a\u{FFFD}.jpg")
        }
        let valid: [CChar] = Array("café.jpg".utf8CString)
        valid.withUnsafeBufferPointer { #expect(PathFilter.name(fromCString: $0.baseAddress!) == "café.jpg") }
    }
}
