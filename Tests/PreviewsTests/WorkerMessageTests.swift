import Testing
import Previews

/// The worker protocol's frames and bodies; replies are untrusted bytes.
@Suite struct WorkerMessageTests {
    @Test func requestsAndRepliesRoundTrip() throws {
        let request = WorkerMessage.Request(format: .cr2, wantThumbnail: false)
        #expect(try WorkerMessage.decodeRequest(WorkerMessage.encode(request)) == request)
        let reply = WorkerMessage.Reply(width: 3000, height: 4000, dateTimeOriginal: "2021:05:06 07:08:09",
                                        offsetTimeOriginal: "+09:00", quality: 80, jpeg: [0xFF, 0xD8, 1, 2, 3])
        #expect(try WorkerMessage.decodeReply(WorkerMessage.encode(reply)) == reply)
        let failure = WorkerMessage.Reply.failed("cannot read the image: VipsJpeg: Premature end of JPEG file")
        #expect(try WorkerMessage.decodeReply(WorkerMessage.encode(failure)) == failure)
    }

    @Test func framesArriveInPieces() throws {
        let a = WorkerMessage.frame([1, 2, 3]), b = WorkerMessage.frame([])
        var reader = WorkerMessage.FrameReader()
        let stream = a + b
        var bodies: [[UInt8]] = []
        for byte in stream {
            reader.append([byte][...])
            while let body = try reader.next() { bodies.append(body) }
        }
        #expect(bodies == [[1, 2, 3], []])
        #expect(reader.isEmpty)
    }

    @Test func anOversizedFrameIsRefusedBeforeItIsBuffered() {
        var reader = WorkerMessage.FrameReader()
        reader.append([0x7F, 0xFF, 0xFF, 0xFF][...])
        #expect(throws: WorkerMessage.DecodeError.self) { try reader.next() }
    }

    @Test func aFieldLongerThanItsBodyIsRefused() {
        var body = WorkerMessage.encode(WorkerMessage.Reply(jpeg: [1, 2, 3]))
        body.removeLast()
        #expect(throws: WorkerMessage.DecodeError.self) { try WorkerMessage.decodeReply(body) }
        var lying = WorkerMessage.encode(WorkerMessage.Reply(jpeg: [1]))
        let at = lying.count - 5
        lying.replaceSubrange(at..<at + 4, with: [0xFF, 0xFF, 0xFF, 0xF0])
        #expect(throws: WorkerMessage.DecodeError.self) { try WorkerMessage.decodeReply(lying) }
    }

    @Test func trailingBytesAndOtherVersionsAreRefused() {
        #expect(throws: WorkerMessage.DecodeError.self) { try WorkerMessage.decodeReply(WorkerMessage.encode(WorkerMessage.Reply()) + [0]) }
        var other = WorkerMessage.encode(WorkerMessage.Reply())
        other[0] = 2
        #expect(throws: WorkerMessage.DecodeError.self) { try WorkerMessage.decodeReply(other) }
        #expect(throws: WorkerMessage.DecodeError.self) { try WorkerMessage.decodeRequest([1] + Array("\u{0}\u{0}\u{0}\u{3}xyz".utf8) + [1]) }
    }
}
