import ManifestFormat
import RestoreWire
import Testing
import RestoreFiles

/// How `restore --by-date` names and dates a file (privacy.md "Export every photo of the account").
@Suite struct ExportNameTests {
    func md5(_ hex: String) -> MD5Value { MD5Value(hex: hex)! }
    let a = "0123456789abcdef0123456789abcdef"
    let b = "01234567ffffffffffffffffffffffff"   // the same first 8 hex digits as `a`
    let c = "fedcba9876543210fedcba9876543210"

    @Test func unixTimesAreUTCDates() {
        let cases: [(Int64, [Int64])] = [
            (0, [1970, 1, 1, 0, 0, 0]),
            (951_782_400, [2000, 2, 29, 0, 0, 0]),
            (1_700_000_000, [2023, 11, 14, 22, 13, 20]),
            (4_102_444_799, [2099, 12, 31, 23, 59, 59]),
            (-1, [1969, 12, 31, 23, 59, 59]),
        ]
        for (seconds, expected) in cases {
            let t = UTCTime(seconds)
            #expect([t.year, t.month, t.day, t.hour, t.minute, t.second] == expected, "\(seconds)")
        }
    }

    @Test func theCatalogDateWinsWhenItIsIn1970To2099() {
        #expect(ExportName.date(catalog: 1_650_000_000, modified: 1_700_000_000) == (1_650_000_000, .catalog))
        #expect(ExportName.date(catalog: 0, modified: 1_700_000_000) == (0, .catalog))
        #expect(ExportName.date(catalog: 4_102_444_799, modified: 1_700_000_000) == (4_102_444_799, .catalog))
    }

    @Test func aDateOutside1970To2099FallsBackToTheObjectsTime() {
        #expect(ExportName.date(catalog: -1, modified: 1_700_000_000) == (1_700_000_000, .object))
        #expect(ExportName.date(catalog: 4_102_444_800, modified: 1_700_000_000) == (1_700_000_000, .object))
        #expect(ExportName.date(catalog: Int64.max, modified: 1_700_000_000) == (1_700_000_000, .object))
        #expect(ExportName.date(catalog: nil, modified: 1_700_000_000) == (1_700_000_000, .object))
        // Neither: 1970-01-01, said so.
        #expect(ExportName.date(catalog: nil, modified: nil) == (0, .none))
        #expect(ExportName.date(catalog: -5, modified: 9_999_999_999) == (0, .none))
    }

    @Test func aNameIsTheDateTheFirst8HexDigitsAndTheExtension() {
        let p = ExportName.path(seconds: 1_700_000_000, md5: md5(a), ext: "heic", wholeMD5: false)
        #expect(p.folder == "2023/11" && p.file == "2023-11-14 22.13.20 01234567.heic")
        let whole = ExportName.path(seconds: 0, md5: md5(a), ext: "jpg", wholeMD5: true)
        #expect(whole.folder == "1970/01" && whole.file == "1970-01-01 00.00.00 \(a).jpg")
        // An extension the daemon should not have sent: bin.
        #expect(ExportName.path(seconds: 0, md5: md5(a), ext: "../x", wholeMD5: false).file == "1970-01-01 00.00.00 01234567.bin")
    }

    func object(_ hex: String, date: Int64?, modified: Int64? = 1_600_000_000, ext: String = "jpg", size: Int64 = 10) -> ExportObject {
        .init(md5: md5(hex), size: size, storageClass: "STANDARD", modified: modified, catalogDate: date, ext: ext)
    }

    @Test func twoObjectsThatWouldShareANameTheLaterInKeyOrderTakesItsWholeMD5() {
        // Listed out of order: key order decides, not the order they arrived in.
        let planned = ExportName.plan([object(b, date: 1_700_000_000), object(a, date: 1_700_000_000), object(c, date: 1_700_000_000)],
                                      to: "/export/")
        let names = planned.map { String(decoding: $0.item.destination, as: UTF8.self) }
        #expect(names == ["2023/11/2023-11-14 22.13.20 01234567.jpg", "2023/11/2023-11-14 22.13.20 \(b).jpg",
                          "2023/11/2023-11-14 22.13.20 fedcba98.jpg"])
        #expect(planned.allSatisfy { $0.item.root == "/export" && $0.item.version.mtimeSec == 1_700_000_000 && $0.item.version.mtimeNsec == 0 })
        // Another second or another extension is another name.
        let apart = ExportName.plan([object(a, date: 1_700_000_000), object(b, date: 1_700_000_001), object(c, date: 1_700_000_000)], to: "/x")
        #expect(apart.map { String(decoding: $0.item.path, as: UTF8.self) }
                == ["2023-11-14 22.13.20 01234567.jpg", "2023-11-14 22.13.21 01234567.jpg", "2023-11-14 22.13.20 fedcba98.jpg"])
        let kinds = ExportName.plan([object(a, date: 1_700_000_000, ext: "jpg"), object(b, date: 1_700_000_000, ext: "mov")], to: "/x")
        #expect(kinds.map { String(decoding: $0.item.path, as: UTF8.self) } == ["2023-11-14 22.13.20 01234567.jpg", "2023-11-14 22.13.20 01234567.mov"])
    }

    @Test func eachObjectIsWrittenOnceAndDatedAsItsSourceSays() {
        let planned = ExportName.plan([object(a, date: 1_700_000_000), object(a, date: 1_500_000_000), object(c, date: nil),
                                       object(b, date: -1, modified: nil)], to: "/x")
        #expect(planned.count == 3)
        #expect(planned.map(\.dated) == [.catalog, .none, .object])
        #expect(planned[0].item.version.mtimeSec == 1_700_000_000)
        #expect(String(decoding: planned[1].item.destination, as: UTF8.self) == "1970/01/1970-01-01 00.00.00 01234567.jpg")
        #expect(String(decoding: planned[2].item.destination, as: UTF8.self) == "2020/09/2020-09-13 12.26.40 fedcba98.jpg")
        #expect(planned.allSatisfy { RestorePlan.isSafePath($0.item.destination) })
    }
}

extension UTCTime {
    init(year: Int64, month: Int64, day: Int64, hour: Int64, minute: Int64, second: Int64) {
        self.init(0)
        (self.year, self.month, self.day, self.hour, self.minute, self.second) = (year, month, day, hour, minute, second)
    }
}
