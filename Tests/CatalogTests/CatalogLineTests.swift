import Testing
import Catalog

/// Lines of snapshots other writers made, read as leniently as the apps read them.
@Suite struct CatalogLineTests {
    let md5 = "9f8e7d6c5b4a32109f8e7d6c5b4a3210"

    @Test func aWellFormedRowGivesItsMD5AndDate() {
        let line = CatalogLine.parse("a1b2c3d4e5f67890a1b2c3d4e5f67890,1048576,\(md5),1699999999,JPEG")
        #expect(line == CatalogLine(md5: md5, date: 1_699_999_999))
    }

    @Test func spacesTabsAndACarriageReturnAroundColumnsAreIgnoredAsTheAppsDo() {
        let line = CatalogLine.parse(" h , 12 ,\t\(md5.uppercased()) , 1700000000 ,JPEG\r")
        #expect(line == CatalogLine(md5: md5, date: 1_700_000_000), "the MD5 is matched in lowercase")
    }

    @Test func datesTheAppsParseAsNumbersSortAsNumbers() {
        #expect(CatalogLine.parse("h,1,\(md5),1699999999.5,PNG").date == 1_699_999_999.5)
        #expect(CatalogLine.parse("h,1,\(md5),1.7e9,PNG").date == 1.7e9)
        #expect(CatalogLine.parse("h,1,\(md5),-86400,PNG").date == -86400)
        #expect(CatalogLine.parse("h,1,\(md5),+5,PNG").date == 5)
    }

    @Test func malformedLinesAreKeptButHaveNoDateOrNoMD5() {
        // Four columns (an older app), an empty MD5 (not computed yet), junk: the apps skip
        // or keep them; the merge copies them through and sorts undated ones last.
        #expect(CatalogLine.parse("h,1,\(md5),1700000000") == CatalogLine(md5: md5, date: 1_700_000_000))
        #expect(CatalogLine.parse("h,1,,1700000000,HEIF") == CatalogLine(md5: nil, date: 1_700_000_000))
        #expect(CatalogLine.parse("h,1,\(md5),yesterday,JPEG") == CatalogLine(md5: md5, date: nil))
        #expect(CatalogLine.parse("h,1,\(md5),nan,JPEG").date == nil)
        #expect(CatalogLine.parse("h,1,\(md5),,JPEG").date == nil)
        #expect(CatalogLine.parse("garbage") == CatalogLine(md5: nil, date: nil))
        #expect(CatalogLine.parse("h,1,not-an-md5-but-thirty-two-chars,5,JPEG").md5 == nil)
        #expect(CatalogLine.parse("h,1,\(md5)0,5,JPEG").md5 == nil, "33 digits is not an MD5")
        #expect(CatalogLine.parse("").date == nil)
    }

    @Test func aDateOfNineteenDigitsFallsBackToTheGeneralParser() {
        #expect(CatalogLine.parse("h,1,\(md5),1234567890123456789,JPEG").date == 1_234_567_890_123_456_789)
    }

    @Test func theHeaderIsRecognisedWithFourOrFiveColumnsAndBlankLinesAreNotRows() {
        func check(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) -> Bool {
            var bytes = Array(text.utf8)
            return bytes.withUnsafeMutableBufferPointer { body(UnsafeBufferPointer($0)) }
        }
        #expect(check(CatalogFormat.header, CatalogLine.isHeader))
        #expect(check("photo_head_md5,file_size,photo_md5,photo_date", CatalogLine.isHeader))
        #expect(!check("a1b2,1,\(md5),1,JPEG", CatalogLine.isHeader))
        #expect(check("", CatalogLine.isBlank) && check(" \t\r", CatalogLine.isBlank))
        #expect(!check(" x", CatalogLine.isBlank))
    }

    @Test func newestFirstWithUndatedRowsLast() {
        #expect(CatalogLine.isNewerOrSame(5, than: 4))
        #expect(CatalogLine.isNewerOrSame(5, than: 5))
        #expect(!CatalogLine.isNewerOrSame(4, than: 5))
        #expect(CatalogLine.isNewerOrSame(-1e18, than: nil))
        #expect(!CatalogLine.isNewerOrSame(nil, than: -1e18))
        #expect(CatalogLine.isNewerOrSame(nil, than: nil))
    }
}
