import Testing
import Control

@Suite struct HTTPBodyDecoderTests {
    func decode(_ wire: String, pieces: Int, chunked: Bool = true) throws -> (String, Bool) {
        var decoder = HTTPBodyDecoder(chunked: chunked)
        var out: [UInt8] = []
        let bytes = Array(wire.utf8)
        var i = 0
        while i < bytes.count {
            let piece = Array(bytes[i..<min(bytes.count, i + pieces)])
            try piece.withUnsafeBytes { raw in try decoder.feed(raw) { out += Array($0) } }
            i += pieces
        }
        return (String(decoding: out, as: UTF8.self), decoder.finished)
    }

    @Test func chunksComeOutWholeHoweverTheyAreCut() throws {
        let wire = "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: y\r\n\r\n"
        for pieces in [1, 2, 3, 7, 100] {
            let (text, done) = try decode(wire, pieces: pieces)
            #expect(text == "hello, world" && done)
        }
        let (partial, done) = try decode("5\r\nhel", pieces: 4)
        #expect(partial == "hel" && !done)
    }

    @Test func aPlainBodyPassesThrough() throws {
        #expect(try decode("5\r\nhello", pieces: 3, chunked: false).0 == "5\r\nhello")
    }

    @Test func garbageIsRefused() {
        #expect(throws: HTTPBodyDecoder.DecodeError.self) { try decode("zz\r\n", pieces: 10) }
        #expect(throws: HTTPBodyDecoder.DecodeError.self) { try decode("2\r\nabX", pieces: 10) }
    }
}
