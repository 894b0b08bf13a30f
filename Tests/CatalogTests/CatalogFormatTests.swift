import Testing
import Catalog

/// Keys, the pointer, the header and our rows exactly as app-catalog.md spells them.
@Suite struct CatalogFormatTests {
    let user = "550E8400-E29B-41D4-A716-446655440000"
    let md5 = "0cc175b9c0f1b6a831c399e269772661"

    @Test func keysKeepTheUserIdVerbatim() {
        #expect(CatalogFormat.pointerKey(userId: user) == "catalogs/550E8400-E29B-41D4-A716-446655440000/.photolala.md5")
        #expect(CatalogFormat.snapshotKey(userId: user, md5: md5)
            == "catalogs/550E8400-E29B-41D4-A716-446655440000/.photolala.0cc175b9c0f1b6a831c399e269772661.csv")
        #expect(CatalogFormat.photoKey(userId: user, md5: md5) == "photos/\(user)/\(md5).dat")
        #expect(CatalogFormat.thumbnailKey(userId: user, md5: md5) == "thumbnails/\(user)/\(md5).jpg")
        #expect(CatalogFormat.pointerKey(userId: "lower-case-id").contains("lower-case-id"), "never changes the case either way")
    }

    @Test func theHeaderIsExactlyTheAppsOne() {
        #expect(CatalogFormat.header == "photo_head_md5,file_size,photo_md5,photo_date,format")
    }

    @Test func aPointerIsTrimmedAndMustBeAnMD5() {
        #expect(CatalogFormat.pointerMD5(Array(md5.utf8)) == md5)
        #expect(CatalogFormat.pointerMD5(Array(" \(md5)\r\n".utf8)) == md5)
        #expect(CatalogFormat.pointerMD5(Array(md5.uppercased().utf8)) == md5.uppercased(), "kept as written: it spells the key")
        #expect(CatalogFormat.pointerMD5(Array("".utf8)) == nil)
        #expect(CatalogFormat.pointerMD5(Array(md5.dropLast().utf8)) == nil)
        #expect(CatalogFormat.pointerMD5(Array("\(md5)\n\(md5)".utf8)) == nil)
        #expect(CatalogFormat.pointerMD5(Array("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz".utf8)) == nil)
        #expect(CatalogFormat.pointerBody(md5: md5) == Array(md5.utf8), "32 digits and nothing else, as the apps write it")
    }

    @Test func ourRowIsFiveColumnsWithoutSpaces() {
        let row = CatalogRow(headMD5: "a" + String(md5.dropFirst()), size: 1_048_576, md5: md5, date: 1_699_999_999, format: "RAW-DNG")
        #expect(row.line == "a\(md5.dropFirst()),1048576,\(md5),1699999999,RAW-DNG")
        #expect(row.problem == nil)
        #expect(CatalogRow(headMD5: md5, size: 1, md5: md5, date: -5, format: "JPEG").line.hasSuffix(",-5,JPEG"))
    }

    @Test func rowsTheAppsCouldNotReadAreRefused() {
        let good = CatalogRow(headMD5: md5, size: 10, md5: md5, date: 1, format: "JPEG")
        var r = good; r.md5 = md5.uppercased()
        #expect(r.problem?.contains("MD5") == true)
        r = good; r.headMD5 = "abc"
        #expect(r.problem?.contains("head MD5") == true)
        r = good; r.size = -1
        #expect(r.problem?.contains("negative") == true)
        for format in ["RAW-CR3", "RAW-RW2", "MOV", "UNKNOWN", "jpeg", ""] {
            r = good; r.format = format
            #expect(r.problem?.contains("format") == true, "\(format)")
        }
        for format in ["JPEG", "PNG", "HEIF", "TIFF", "GIF", "WEBP", "BMP", "RAW-CR2", "RAW-NEF", "RAW-ARW", "RAW-DNG", "RAW-ORF", "RAW-RAF"] {
            r = good; r.format = format
            #expect(r.problem == nil, "\(format)")
        }
    }
}

@Suite struct SyncPhasesTests {
    @Test func secondsAreWrittenWithTwoDecimalsWithoutAFormatStyle() {
        #expect(SyncPhases.seconds(.milliseconds(15_204)) == "15.20")
        #expect(SyncPhases.seconds(.milliseconds(7)) == "0.01")
        #expect(SyncPhases.seconds(.seconds(3)) == "3.00")
    }

    @Test func eachStepSaysHowLongItTook() {
        var phases = SyncPhases()
        phases.lap("download")
        phases.lap("merge")
        #expect(phases.description.hasPrefix("download ") && phases.description.contains(" ms, merge ") && phases.description.hasSuffix(" ms"))
    }
}
