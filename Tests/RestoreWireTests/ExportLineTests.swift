import ManifestFormat
import Testing
import RestoreWire

/// The export's listing on the wire: every line read back as sent, a hostile key cannot
/// split or forge a line, anything else is refused.
@Suite struct ExportLineTests {
    let object = ExportObject(md5: MD5Value(hex: "0123456789abcdef0123456789abcdef")!, size: 1234, storageClass: "DEEP_ARCHIVE",
                                   modified: 1_700_000_000, catalogDate: nil, ext: "heic")

    func parsed(_ line: ExportLine) throws -> [ExportLine] {
        var reader = ExportLineReader()
        let bytes = Array(line.text.utf8)
        // In two pieces, as a socket may give them.
        let half = bytes.count / 2
        var out = try bytes[..<half].withUnsafeBytes { try reader.feed($0) }
        out += try bytes[half...].withUnsafeBytes { try reader.feed($0) }
        return out
    }

    @Test func everyLineReadsBackAsSent() throws {
        let lines: [ExportLine] = [
            .wait, .end, .catalog(.none), .catalog(.read(rows: 1_000_000, malformed: 3)), .catalog(.unreadable("a pointer, not an MD5")),
            .object(object), .object(.init(md5: object.md5, size: 0, storageClass: "STANDARD", modified: nil, catalogDate: -5, ext: "bin")),
            .skipped(key: "photos/U/../x.dat", why: "not a photo's object"), .fail("the bucket said 503\nno"),
        ]
        for line in lines { #expect(try parsed(line) == [line]) }
    }

    @Test func aKeyWithSpacesAndNewlinesStaysOneLine() throws {
        let key = "photos/U/a b\nobject 0123456789abcdef0123456789abcdef 1 STANDARD - - jpg\n%41.dat"
        let line = ExportLine.skipped(key: key, why: "not a photo's object")
        #expect(line.text.filter { $0 == "\n" }.count == 1)
        #expect(try parsed(line) == [line])
    }

    @Test(arguments: [
        "object 0123456789ABCDEF0123456789ABCDEF 1 STANDARD - - jpg",   // an MD5 in capitals is not a key's
        "object 0123456789abcdef0123456789abcdef -1 STANDARD - - jpg",
        "object 0123456789abcdef0123456789abcdef 1 STANDARD x - jpg",
        "object 0123456789abcdef0123456789abcdef 1 STANDARD - -",
        "skipped a%zz why", "catalog read many 0", "catalog", "", "hello",
    ])
    func nonsenseIsRefused(_ text: String) {
        #expect(throws: ExportLine.Malformed.self) { try ExportLine.parse(text) }
    }

    @Test func anExtensionOutsideTheListBecomesBin() throws {
        let line = try ExportLine.parse("object 0123456789abcdef0123456789abcdef 5 STANDARD 1 2 ..%2Fetc")
        guard case .object(let o) = line else { Issue.record("not an object: \(line)"); return }
        #expect(o.ext == "bin" && o.modified == 1 && o.catalogDate == 2)
    }

    @Test func aLineWithoutEndIsRefusedPast64KiB() {
        var reader = ExportLineReader()
        let long = [UInt8](repeating: UInt8(ascii: "a"), count: 70_000)
        #expect(throws: ExportLine.Malformed.self) { try long.withUnsafeBytes { try reader.feed($0) } }
    }
}
