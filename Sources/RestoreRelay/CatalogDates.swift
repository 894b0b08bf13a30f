#if canImport(Glibc)
import Glibc
#endif
import ManifestFormat
import PhotolalaCore
import RestoreWire
import Synchronization

/// What the apps' catalog says of each photo an export names (app-catalog.md): its
/// `photo_date` and `format`, looked up by MD5. A catalog can hold a million rows (85 MB),
/// so the table lives in a temporary file with no name (gone when closed, whatever
/// happens to the daemon), sorted by MD5: the rows are read from the downloaded snapshot
/// in runs of `runLength`, each sorted in memory and written out, then merged; a lookup
/// reads one block of it. Memory stays flat whatever the catalog's size.
package final class CatalogDates: Sendable {
    /// What a row gave: its date (whole seconds, nil when the column is not a number),
    /// the extension its `format` names (nil when it names none) and its `file_size` (nil
    /// when the column is not a whole number): an export bounds the object by it.
    package struct Entry: Sendable, Equatable {
        package var date: Int64?
        package var ext: String?
        package var size: Int64?

        package init(date: Int64?, ext: String?, size: Int64? = nil) {
            self.date = date
            self.ext = ext
            self.size = size
        }
    }

    package struct Counts: Sendable, Equatable {
        /// Rows read (the header and blank lines are not rows).
        package var rows = 0
        /// Rows without an MD5 in their third column, or longer than a row can be: not used.
        package var malformed = 0

        package init(rows: Int = 0, malformed: Int = 0) {
            self.rows = rows
            self.malformed = malformed
        }
    }

    /// 16 bytes of MD5, the date (big-endian; `Int64.min`: none), the extension's number,
    /// the size (big-endian; -1: none).
    static let recordSize = 33
    static let blockRecords = 1024

    private let file: ScratchFile
    private let count: Int
    /// The first MD5 of each block of `blockRecords` records.
    private let index: [MD5Value]
    private let cache = Mutex<(block: Int, bytes: [UInt8])>((-1, []))
    package let counts: Counts

    private init(file: ScratchFile, count: Int, index: [MD5Value], counts: Counts) {
        self.file = file
        self.count = count
        self.index = index
        self.counts = counts
    }

    /// The row of `md5`, the first one when the catalog lists it twice.
    package func lookup(_ md5: MD5Value) throws(ScratchFile.Failure) -> Entry? {
        // The last block starting at or before it.
        var (lo, hi) = (0, index.count)
        while lo < hi {
            let mid = (lo + hi) / 2
            if index[mid] <= md5 { lo = mid + 1 } else { hi = mid }
        }
        guard lo > 0 else { return nil }
        let block = lo - 1
        let bytes = try cache.withLock { cached throws(ScratchFile.Failure) -> [UInt8] in
            if cached.block != block {
                let first = block * Self.blockRecords
                let n = min(Self.blockRecords, count - first)
                cached = (block, try file.read(at: Int64(first * Self.recordSize), count: n * Self.recordSize))
            }
            return cached.bytes
        }
        var (a, b) = (0, bytes.count / Self.recordSize)
        while a < b {
            let mid = (a + b) / 2
            let found = Record.md5(bytes, mid * Self.recordSize)
            if found == md5 { return Record.decode(bytes, mid * Self.recordSize).entry }
            if found < md5 { a = mid + 1 } else { b = mid }
        }
        return nil
    }

    /// How many MD5s the table holds (each once).
    package var distinct: Int { count }

    /// Every MD5 the catalog lists, with its row, in MD5 order: one read of the table, a
    /// block at a time. `body` returns false to stop.
    package func forEach(_ body: (MD5Value, Entry) throws -> Bool) throws {
        var reader = RunReader(file: file, start: 0, count: count, bufferRecords: Self.blockRecords)
        while let r = try reader.next() {
            guard try body(r.md5, r.entry) else { return }
        }
    }

    // MARK: building the table from a downloaded snapshot

    /// Reads the snapshot in `snapshot` (from its start) into a new table whose files go
    /// in `directory`. `cancelled` is asked every few thousand rows.
    ///
    /// Runs of 16,384 rows: a run in memory (its records, the sort's scratch, its bytes)
    /// costs about 2 MB. Runs of 131,072 cost about 13 MB, the peak of a mirror's full pass
    /// over a 100,000-row catalog (docs/benchmarks.md); the merge reads any number of runs
    /// within 1 MB of buffers.
    package static func build(snapshot: ScratchFile, directory: String, runLength: Int = 16_384,
                              cancelled: () -> Bool = { false }) throws(ScratchFile.Failure) -> CatalogDates {
        var counts = Counts()
        let runs = try ScratchFile(directory: directory)
        var runLengths: [Int] = []
        var run: [Record] = []
        run.reserveCapacity(runLength)
        func flush() throws(ScratchFile.Failure) {
            guard !run.isEmpty else { return }
            // By MD5, then by position in the snapshot: the first row of an MD5 wins.
            run.sort { $0.md5 != $1.md5 ? $0.md5 < $1.md5 : $0.seq < $1.seq }
            var bytes = [UInt8]()
            bytes.reserveCapacity(run.count * recordSize)
            for r in run { r.append(to: &bytes) }
            try runs.append(bytes)
            runLengths.append(run.count)
            run.removeAll(keepingCapacity: true)
        }
        var lines = SnapshotLines(file: snapshot)
        var first = true
        while let next = try lines.next() {
            defer { first = false }
            guard case .line(let bytes) = next else {
                counts.rows += 1
                counts.malformed += 1
                continue
            }
            let fields = bytes.withUnsafeBufferPointer { line -> CatalogRowFields.Fields? in
                if first && CatalogRowFields.isHeader(line) { return nil }
                if CatalogRowFields.isBlank(line) { return nil }
                return CatalogRowFields.parse(line)
            }
            guard let fields else { continue }
            counts.rows += 1
            if counts.rows & 0xFFF == 0 && cancelled() { throw .init("stopped") }
            guard let md5 = fields.md5 else {
                counts.malformed += 1
                continue
            }
            let ext = fields.format.flatMap(ExportFormat.ext(word:))
            run.append(Record(md5: md5, date: fields.date, extCode: ext.flatMap { e in ExportFormat.extensions.firstIndex(of: e).map { UInt8($0 + 1) } } ?? 0,
                              size: fields.size, seq: UInt32(truncatingIfNeeded: counts.rows)))
            if run.count == runLength { try flush() }
        }
        try flush()
        run = []
        if runLengths.count <= 1 {
            return try CatalogDates(sorted: runs, count: runLengths.first ?? 0, counts: counts, dedupe: true, directory: directory)
        }
        let merged = try merge(runs, lengths: runLengths, directory: directory, cancelled: cancelled)
        return try CatalogDates(sorted: merged.file, count: merged.count, counts: counts, dedupe: false, directory: directory)
    }

    /// The table over a file of records sorted by MD5; with `dedupe`, written again
    /// without the later records of an MD5 listed twice.
    private convenience init(sorted: ScratchFile, count: Int, counts: Counts, dedupe: Bool, directory: String) throws(ScratchFile.Failure) {
        var file = sorted
        var total = count
        if dedupe && count > 0 {
            let out = try ScratchFile(directory: directory)
            var reader = RunReader(file: sorted, start: 0, count: count, bufferRecords: 4096)
            var writer = RecordWriter(file: out)
            var previous: MD5Value?
            total = 0
            while let r = try reader.next() {
                if r.md5 == previous { continue }
                previous = r.md5
                try writer.add(r)
                total += 1
            }
            try writer.flush()
            file = out
        }
        var index: [MD5Value] = []
        index.reserveCapacity(total / Self.blockRecords + 1)
        var i = 0
        while i < total {
            index.append(Record.md5(try file.read(at: Int64(i * Self.recordSize), count: 16), 0))
            i += Self.blockRecords
        }
        self.init(file: file, count: total, index: index, counts: counts)
    }

    /// The runs merged into one file sorted by MD5, each MD5 once (from the earliest run:
    /// runs are in the snapshot's order).
    private static func merge(_ runs: ScratchFile, lengths: [Int], directory: String,
                              cancelled: () -> Bool) throws(ScratchFile.Failure) -> (file: ScratchFile, count: Int) {
        let out = try ScratchFile(directory: directory)
        var writer = RecordWriter(file: out)
        // 1 MB of buffers however many runs there are (at least 256 records a run).
        let buffer = max(256, (1 << 20) / recordSize / lengths.count)
        var readers: [RunReader] = []
        var start = 0
        for n in lengths {
            readers.append(RunReader(file: runs, start: start, count: n, bufferRecords: buffer))
            start += n
        }
        var heap = MergeHeap()
        for i in readers.indices {
            if let r = try readers[i].next() { heap.push(.init(record: r, run: i)) }
        }
        var previous: MD5Value?
        var count = 0
        while let head = heap.pop() {
            if head.record.md5 != previous {
                try writer.add(head.record)
                previous = head.record.md5
                count += 1
                if count & 0xFFFF == 0 && cancelled() { throw .init("stopped") }
            }
            if let r = try readers[head.run].next() { heap.push(.init(record: r, run: head.run)) }
        }
        try writer.flush()
        return (out, count)
    }

    // MARK: records

    struct Record {
        var md5: MD5Value
        var date: Int64?
        var extCode: UInt8
        var size: Int64?
        var seq: UInt32 = 0

        var entry: Entry {
            Entry(date: date, ext: extCode == 0 || Int(extCode) > ExportFormat.extensions.count ? nil : ExportFormat.extensions[Int(extCode) - 1],
                  size: size)
        }

        func append(to bytes: inout [UInt8]) {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: md5.high >> UInt64(shift))) }
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: md5.low >> UInt64(shift))) }
            let d = UInt64(bitPattern: date ?? Int64.min)
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: d >> UInt64(shift))) }
            bytes.append(extCode)
            let n = UInt64(bitPattern: size ?? -1)
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: n >> UInt64(shift))) }
        }

        static func md5(_ bytes: [UInt8], _ at: Int) -> MD5Value {
            MD5Value(high: word(bytes, at), low: word(bytes, at + 8))
        }

        static func decode(_ bytes: [UInt8], _ at: Int) -> Record {
            let d = Int64(bitPattern: word(bytes, at + 16))
            let n = Int64(bitPattern: word(bytes, at + 25))
            return Record(md5: md5(bytes, at), date: d == Int64.min ? nil : d, extCode: bytes[at + 24], size: n < 0 ? nil : n)
        }

        private static func word(_ bytes: [UInt8], _ at: Int) -> UInt64 {
            var v: UInt64 = 0
            for i in at..<at + 8 { v = v << 8 | UInt64(bytes[i]) }
            return v
        }
    }

    /// A run read back a buffer at a time.
    private struct RunReader {
        let file: ScratchFile
        var position: Int
        let end: Int
        let bufferRecords: Int
        var buffer: [UInt8] = []
        var offset = 0

        init(file: ScratchFile, start: Int, count: Int, bufferRecords: Int) {
            self.file = file
            position = start
            end = start + count
            self.bufferRecords = bufferRecords
        }

        mutating func next() throws(ScratchFile.Failure) -> Record? {
            if offset >= buffer.count {
                guard position < end else { return nil }
                let n = min(bufferRecords, end - position)
                buffer = try file.read(at: Int64(position * CatalogDates.recordSize), count: n * CatalogDates.recordSize)
                position += n
                offset = 0
                guard buffer.count == n * CatalogDates.recordSize else { throw .init("a temporary file was cut short") }
            }
            defer { offset += CatalogDates.recordSize }
            return Record.decode(buffer, offset)
        }
    }

    private struct RecordWriter {
        let file: ScratchFile
        var bytes: [UInt8] = []

        init(file: ScratchFile) {
            self.file = file
        }

        mutating func add(_ r: Record) throws(ScratchFile.Failure) {
            r.append(to: &bytes)
            if bytes.count >= 1 << 20 { try flush() }
        }

        mutating func flush() throws(ScratchFile.Failure) {
            try file.append(bytes)
            bytes.removeAll(keepingCapacity: true)
        }
    }

    /// The smallest head of the runs; equal MD5s come out in run order.
    private struct MergeHeap {
        struct Item {
            var record: Record
            var run: Int
        }
        private var items: [Item] = []

        private static func less(_ a: Item, _ b: Item) -> Bool {
            a.record.md5 != b.record.md5 ? a.record.md5 < b.record.md5 : a.run < b.run
        }

        mutating func push(_ item: Item) {
            items.append(item)
            var i = items.count - 1
            while i > 0 {
                let parent = (i - 1) / 2
                guard Self.less(items[i], items[parent]) else { break }
                items.swapAt(i, parent)
                i = parent
            }
        }

        mutating func pop() -> Item? {
            guard let top = items.first else { return nil }
            let last = items.removeLast()
            if !items.isEmpty {
                items[0] = last
                var i = 0
                while true {
                    let (l, r) = (2 * i + 1, 2 * i + 2)
                    var smallest = i
                    if l < items.count && Self.less(items[l], items[smallest]) { smallest = l }
                    if r < items.count && Self.less(items[r], items[smallest]) { smallest = r }
                    if smallest == i { break }
                    items.swapAt(i, smallest)
                    i = smallest
                }
            }
            return top
        }
    }
}

/// A catalog line read the way the apps read one (app-catalog.md): columns split at
/// commas, spaces and tabs around them ignored; the MD5 (third column, either case), the
/// date (fourth, Unix seconds, a decimal number the apps' `TimeInterval(String)` takes;
/// taken down to the whole second), the format (fifth) and the file's size (second, a
/// whole number of bytes).
package enum CatalogRowFields {
    package typealias Fields = (md5: MD5Value?, date: Int64?, format: String?, size: Int64?)

    package static func parse(_ text: String) -> Fields {
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBufferPointer { parse(UnsafeBufferPointer($0)) }
    }

    package static func parse(_ line: UnsafeBufferPointer<UInt8>) -> Fields {
        var out: Fields = (nil, nil, nil, nil)
        var column = 0
        var start = 0
        for index in 0...line.count where index == line.count || line[index] == UInt8(ascii: ",") {
            let field = trimmed(line, start, index)
            switch column {
            case 1: out.size = size(line, field)
            case 2: out.md5 = md5(line, field)
            case 3: out.date = date(line, field)
            case 4: out.format = field.count <= 16 ? String(decoding: UnsafeBufferPointer(rebasing: line[field]), as: UTF8.self) : nil
            default: break
            }
            column += 1
            start = index + 1
            if column > 4 { break }
        }
        return out
    }

    /// The first line is a header when it starts like the spec's (older apps wrote four columns).
    package static func isHeader(_ line: UnsafeBufferPointer<UInt8>) -> Bool {
        let prefix = Array("photo_head_md5".utf8)
        return line.count >= prefix.count && zip(line, prefix).allSatisfy { $0 == $1 }
    }

    package static func isBlank(_ line: UnsafeBufferPointer<UInt8>) -> Bool {
        line.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
    }

    private static func trimmed(_ line: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Range<Int> {
        var (lower, upper) = (start, end)
        while lower < upper, line[lower] == 0x20 || line[lower] == 0x09 { lower += 1 }
        while upper > lower, line[upper - 1] == 0x20 || line[upper - 1] == 0x09 || line[upper - 1] == 0x0D { upper -= 1 }
        return lower..<upper
    }

    /// Decimal digits only, at most 18 of them (an exabyte): anything else is no size.
    private static func size(_ line: UnsafeBufferPointer<UInt8>, _ field: Range<Int>) -> Int64? {
        guard !field.isEmpty, field.count <= 18 else { return nil }
        var n: Int64 = 0
        for i in field {
            let b = line[i]
            guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") else { return nil }
            n = n * 10 + Int64(b - UInt8(ascii: "0"))
        }
        return n
    }

    private static func md5(_ line: UnsafeBufferPointer<UInt8>, _ field: Range<Int>) -> MD5Value? {
        guard field.count == 32 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (n, i) in field.enumerated() {
            let b = line[i]
            let v: UInt8
            switch b {
            case 0x30...0x39: v = b - 0x30
            case 0x61...0x66: v = b - 0x61 + 10
            case 0x41...0x46: v = b - 0x41 + 10
            default: return nil
            }
            if n < 16 { high = high << 4 | UInt64(v) } else { low = low << 4 | UInt64(v) }
        }
        return MD5Value(high: high, low: low)
    }

    private static func date(_ line: UnsafeBufferPointer<UInt8>, _ field: Range<Int>) -> Int64? {
        guard !field.isEmpty, field.count <= 40 else { return nil }
        var i = field.lowerBound
        let negative = line[i] == UInt8(ascii: "-")
        if negative || line[i] == UInt8(ascii: "+") { i += 1 }
        // Whole seconds, what every writer puts there.
        if i < field.upperBound, field.upperBound - i <= 18, (i..<field.upperBound).allSatisfy({ (48...57).contains(line[$0]) }) {
            var value: Int64 = 0
            for j in i..<field.upperBound { value = value * 10 + Int64(line[j] - 48) }
            return negative ? -value : value
        }
        guard let parsed = Double(String(decoding: UnsafeBufferPointer(rebasing: line[field]), as: UTF8.self)), parsed.isFinite,
              parsed > -9.0e18, parsed < 9.0e18 else { return nil }
        return Int64(parsed.rounded(.down))
    }
}

/// The lines of the snapshot file, read through one buffer. A line longer than a row can
/// be (4 KiB) is skipped whole and given as `.tooLong`, so one bad line costs only its row.
private struct SnapshotLines {
    enum Line {
        case line([UInt8])
        case tooLong
    }

    let file: ScratchFile
    var buffer = [UInt8](repeating: 0, count: 256 << 10)
    var start = 0
    var end = 0
    var offset: Int64 = 0
    var atEnd = false
    static let maxLine = 4096

    init(file: ScratchFile) {
        self.file = file
    }

    /// nil at the end.
    mutating func next() throws(ScratchFile.Failure) -> Line? {
        var line: [UInt8] = []
        var skipping = false
        while true {
            if start == end {
                if atEnd { return skipping ? .tooLong : line.isEmpty ? nil : .line(line) }
                let n = try file.read(into: &buffer, at: offset)
                offset += Int64(n)
                (start, end) = (0, n)
                if n == 0 { atEnd = true }
                continue
            }
            let newline = buffer[start..<end].firstIndex(of: 0x0A)
            let stop = newline ?? end
            if !skipping {
                line.append(contentsOf: buffer[start..<stop])
                if line.count > Self.maxLine {
                    skipping = true
                    line = []
                }
            }
            start = newline.map { $0 + 1 } ?? end
            if newline != nil { return skipping ? .tooLong : .line(line) }
        }
    }
}
