import Foundation
import ManifestFormat
import RestoreFiles
import Testing
import RestoreRelay

/// The catalog's dates and formats as an export reads them: the apps' way of reading a
/// line, malformed rows skipped one by one, a table on disk sorted in runs and merged.
@Suite struct CatalogDatesTests {
    let directory = FileManager.default.temporaryDirectory.path

    func md5(_ n: Int) -> String { String(format: "%032lx", n * 7919 + 12345) }

    func table(_ text: String, runLength: Int = 131_072) throws -> CatalogDates {
        let file = try ScratchFile(directory: directory)
        try file.append(Array(text.utf8))
        return try CatalogDates.build(snapshot: file, directory: directory, runLength: runLength)
    }

    func lookup(_ t: CatalogDates, _ hex: String) throws -> CatalogDates.Entry? {
        try t.lookup(MD5Value(hex: hex)!)
    }

    @Test func rowsAreReadAsTheAppsReadThem() throws {
        let upper = "ABCDEF0123456789ABCDEF0123456789"
        let t = try table("""
            photo_head_md5,file_size,photo_md5,photo_date,format
            \(md5(0)),1000,\(md5(1)),1700000000,HEIF
             \(md5(0)) , 10 , \(upper) , 1600000000.75 , JPEG \r

            \(md5(0)),1,\(md5(2)),,PNG
            \(md5(0)),1,\(md5(3)),-86400,RAW-CR2
            \(md5(0)),1,\(md5(4)),1e9,
            \(md5(0)),1,\(md5(5)),soon,WEBP
            \(md5(0)),1,\(md5(6)),99999999999999999999999,TIFF
            \(md5(0)),1,\(md5(7)),1700000000
            """)
        #expect(t.counts == .init(rows: 8, malformed: 0))
        #expect(try lookup(t, md5(1)) == .init(date: 1_700_000_000, ext: "heic", size: 1000))
        // Either case, spaces and a carriage return around the columns, a fraction taken down.
        #expect(try lookup(t, upper.lowercased()) == .init(date: 1_600_000_000, ext: "jpg", size: 10))
        #expect(try lookup(t, md5(2)) == .init(date: nil, ext: "png", size: 1))
        // Out of 1970–2099 is kept as written: the name decides (ExportName).
        #expect(try lookup(t, md5(3)) == .init(date: -86_400, ext: "cr2", size: 1))
        #expect(try lookup(t, md5(4)) == .init(date: 1_000_000_000, ext: nil, size: 1))
        #expect(try lookup(t, md5(5)) == .init(date: nil, ext: "webp", size: 1))
        #expect(try lookup(t, md5(6)) == .init(date: nil, ext: "tif", size: 1))
        #expect(try lookup(t, md5(7)) == .init(date: 1_700_000_000, ext: nil, size: 1))
        #expect(try lookup(t, md5(8)) == nil)
    }

    @Test func malformedRowsCostOnlyThemselves() throws {
        let tooLong = String(repeating: "x", count: 5000)
        let t = try table("""
            \(md5(0)),1,\(md5(1)),1700000000,JPEG
            \(md5(0)),1,not-an-md5,1700000000,JPEG
            \(md5(0)),1,\(md5(2))\(tooLong),1700000000,JPEG
            \(tooLong)
            garbage
            \(md5(0)),1,\(md5(3)),1700000001,PNG

            """)
        // No header here: the first line is a row like any other.
        #expect(t.counts == .init(rows: 6, malformed: 4))
        #expect(try lookup(t, md5(1))?.date == 1_700_000_000)
        #expect(try lookup(t, md5(2)) == nil)
        #expect(try lookup(t, md5(3)) == .init(date: 1_700_000_001, ext: "png", size: 1))
    }

    @Test func aPhotoListedTwiceKeepsItsFirstRowAcrossRuns() throws {
        // Runs of 3 rows: 100 rows make 34 runs, merged; every MD5 found, the first row wins.
        var lines = ["photo_head_md5,file_size,photo_md5,photo_date,format"]
        for i in (0..<100).reversed() { lines.append("\(md5(0)),1,\(md5(i)),\(1_600_000_000 + i),JPEG") }
        lines.append("\(md5(0)),1,\(md5(42)),1,PNG")
        lines.append("\(md5(0)),1,\(md5(0)),2,PNG")
        for runLength in [3, 1000] {
            let t = try table(lines.joined(separator: "\n") + "\n", runLength: runLength)
            #expect(t.counts.rows == 102)
            for i in 0..<100 { #expect(try lookup(t, md5(i)) == .init(date: 1_600_000_000 + Int64(i), ext: "jpg", size: 1), "\(i) runs of \(runLength)") }
            #expect(try lookup(t, md5(100)) == nil)
            #expect(try lookup(t, "00000000000000000000000000000000") == nil)
            #expect(try lookup(t, "ffffffffffffffffffffffffffffffff") == nil)
        }
    }

    @Test func aBigCatalogIsLookedUpBlockByBlock() throws {
        var text = ""
        for i in 0..<5000 { text += "h,1,\(md5(i)),\(i),GIF\n" }
        let t = try table(text, runLength: 700)
        for i in stride(from: 0, to: 5000, by: 37) { #expect(try lookup(t, md5(i))?.date == Int64(i)) }
        #expect(try lookup(t, md5(5000)) == nil)
    }

    @Test func anEmptyCatalogHasNoRows() throws {
        let t = try table("photo_head_md5,file_size,photo_md5,photo_date,format\n")
        #expect(t.counts == .init(rows: 0, malformed: 0))
        #expect(try lookup(t, md5(1)) == nil)
    }
}
