import Foundation
import Testing
import Bucket

@Suite("S3 errors")
struct S3ErrorTests {
    /// 2026-11-22T07:00:00Z.
    let serverNow = Date(timeIntervalSince1970: 1_795_330_800)

    @Test("an <Error> body gives code, message, request id and host id")
    func decodesErrorDocument() {
        let body = """
            <?xml version="1.0" encoding="UTF-8"?>
            <Error><Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>4442587FB7D0A2F9</RequestId><HostId>Ab0/c+d=</HostId></Error>
            """
        let error = S3Error.decode(status: 403, headers: [], body: Array(body.utf8), operation: "PutObject",
                                   key: "photos/u/m.dat")
        #expect(error.kind == .forbidden)
        #expect(error.status == 403)
        #expect(error.code == "AccessDenied")
        #expect(error.message == "Access Denied")
        #expect(error.requestId == "4442587FB7D0A2F9")
        #expect(error.hostId == "Ab0/c+d=")
        #expect(error.description.hasPrefix("PutObject photos/u/m.dat failed: S3 answered 403 AccessDenied: Access Denied"
            + " (request id 4442587FB7D0A2F9). "))
        #expect(error.description.contains("photolalactl login"))
    }

    @Test("RequestTimeTooSkewed carries the server's Date, from which the clock offset follows")
    func clockSkew() {
        let body = """
            <?xml version="1.0" encoding="UTF-8"?>
            <Error><Code>RequestTimeTooSkewed</Code><Message>The difference between the request time and the current time is too large.</Message><RequestTime>20261122T063000Z</RequestTime><ServerTime>2026-11-22T07:00:01Z</ServerTime><MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds><RequestId>R1</RequestId><HostId>H1</HostId></Error>
            """
        let error = S3Error.decode(status: 403, headers: [("Date", "Sun, 22 Nov 2026 07:00:00 GMT")],
                                   body: Array(body.utf8))
        #expect(error.kind == .clockSkew)
        #expect(error.serverDate == serverNow)
        #expect(error.clockOffset(localNow: serverNow.addingTimeInterval(-1800)) == 1800)
        #expect(error.advice.contains("timedatectl set-ntp true"))

        // Without a Date header the body's ServerTime is used.
        let fromBody = S3Error.decode(status: 403, headers: [], body: Array(body.utf8))
        #expect(fromBody.serverDate == serverNow.addingTimeInterval(1))
    }

    @Test("server dates: ISO 8601 with or without a fraction, an HTTP date, nothing from garbage")
    func serverDates() {
        func decoded(date: String?, serverTime: String) -> Date? {
            let body = "<Error><Code>RequestTimeTooSkewed</Code><ServerTime>\(serverTime)</ServerTime></Error>"
            return S3Error.decode(status: 403, headers: date.map { [("Date", $0)] } ?? [], body: Array(body.utf8)).serverDate
        }
        #expect(decoded(date: nil, serverTime: "2026-11-22T07:00:00.250Z") == serverNow.addingTimeInterval(0.25))
        #expect(decoded(date: nil, serverTime: "2026-11-22T07:00:00Z") == serverNow)
        #expect(decoded(date: "Sun, 22 Nov 2026 07:00:00 GMT", serverTime: "junk") == serverNow)
        // An unreadable Date falls back to the body's; neither readable: no date.
        #expect(decoded(date: "Sun, 22 Foo 2026 07:00:00 GMT", serverTime: "2026-11-22T07:00:02Z") == serverNow.addingTimeInterval(2))
        #expect(decoded(date: "yesterday", serverTime: "2026-13-45T99:00:00Z") == nil)
    }

    @Test("a 200 answer to CompleteMultipartUpload can still be an error, whitespace-padded")
    func errorInsideOK() {
        let body = "\n   \n<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InternalError</Code>"
            + "<Message>We encountered an internal error. Please try again.</Message><RequestId>X</RequestId></Error>"
        let document = S3Error.ErrorDocument.parse(Array(body.utf8))
        #expect(document?.code == "InternalError")
        let error = S3Error.decode(status: 200, headers: [], body: Array(body.utf8))
        #expect(error.kind == .transient)
        // A successful completion is not mistaken for an error.
        let ok = "<CompleteMultipartUploadResult><ETag>\"abc-2\"</ETag></CompleteMultipartUploadResult>"
        #expect(S3Error.ErrorDocument.parse(Array(ok.utf8)) == nil)
    }

    @Test("HEAD answers have no body: the status decides, or x-amz-error-code when sent")
    func bodilessAnswers() {
        let notFound = S3Error.decode(status: 404, headers: [("x-amz-request-id", "RID")], body: [])
        #expect(notFound.kind == .notFound)
        #expect(notFound.code == "NotFound")
        #expect(notFound.requestId == "RID")
        #expect(notFound.message.isEmpty)

        let forbidden = S3Error.decode(status: 403, headers: [], body: [], operation: "HeadObject")
        #expect(forbidden.kind == .forbidden)
        #expect(forbidden.code == "Forbidden")

        let expired = S3Error.decode(status: 400, headers: [("X-Amz-Error-Code", "ExpiredToken")], body: [])
        #expect(expired.kind == .credentialsExpired)

        #expect(S3Error.decode(status: 400, headers: [], body: []).kind == .permanent)
        #expect(S3Error.decode(status: 503, headers: [], body: []).kind == .transient)
    }

    @Test("a body that is not S3's XML (a proxy's page) is quoted, and the status decides")
    func foreignBody() {
        let html = "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>nginx</body></html>"
        let error = S3Error.decode(status: 502, headers: [], body: Array(html.utf8))
        #expect(error.kind == .transient)
        #expect(error.code == "HTTP502")
        #expect(error.message.contains("502 Bad Gateway"))
        #expect(!error.message.contains("\n"))

        #expect(S3Error.ErrorDocument.parse(Array("<Error><Code>Broken".utf8)) == nil)
        #expect(S3Error.ErrorDocument.parse(Array("not xml".utf8)) == nil)
        #expect(S3Error.ErrorDocument.parse([]) == nil)
    }

    @Test("entities in messages are decoded")
    func entities() {
        let body = "<Error><Code>InvalidArgument</Code><Message>a &lt;b&gt; &amp; &quot;c&quot;</Message></Error>"
        let error = S3Error.decode(status: 400, headers: [], body: Array(body.utf8))
        #expect(error.message == "a <b> & \"c\"")
        #expect(error.kind == .permanent)
    }

    @Test("classification", arguments: [
        (503, "SlowDown", S3Error.Kind.transient),
        (400, "RequestTimeout", .transient),
        (500, "InternalError", .transient),
        (503, "ServiceUnavailable", .transient),
        (500, "SomethingNew", .transient),
        (429, "TooManyRequests", .transient),
        (400, "ExpiredToken", .credentialsExpired),
        (400, "InvalidToken", .credentialsExpired),
        (400, "TokenRefreshRequired", .credentialsExpired),
        (403, "InvalidAccessKeyId", .credentialsExpired),
        (403, "RequestTimeTooSkewed", .clockSkew),
        (403, "AccessDenied", .forbidden),
        (403, "AllAccessDisabled", .forbidden),
        (404, "NoSuchKey", .notFound),
        (404, "NoSuchUpload", .notFound),
        (404, "NoSuchBucket", .notFound),
        (400, "BadDigest", .contentMismatch),
        (403, "SignatureDoesNotMatch", .permanent),
        (400, "EntityTooSmall", .permanent),
        (400, "InvalidPart", .permanent),
        (400, "InvalidPartOrder", .permanent),
        (301, "PermanentRedirect", .permanent),
        (400, "AuthorizationHeaderMalformed", .permanent),
    ] as [(Int, String, S3Error.Kind)])
    func classification(status: Int, code: String, kind: S3Error.Kind) {
        #expect(S3Error.classify(status: status, code: code) == kind)
        let body = "<Error><Code>\(code)</Code><Message>m</Message></Error>"
        #expect(S3Error.decode(status: status, headers: [], body: Array(body.utf8)).kind == kind)
    }

    @Test("every kind's message says what to do")
    func adviceForEveryKind() {
        let kinds: [S3Error.Kind] = [.transient, .credentialsExpired, .clockSkew, .forbidden, .notFound,
                                     .contentMismatch, .localFile, .cancelled, .permanent]
        for kind in kinds {
            let error = S3Error(kind: kind, code: "X", message: "m")
            #expect(error.advice.count > 20, "\(kind)")
        }
        #expect(S3Error(kind: .notFound, code: "NoSuchUpload", message: "").advice.contains("started again"))
        #expect(S3Error(kind: .permanent, code: "PermanentRedirect", message: "").advice.contains("region"))
        let local = S3Error(kind: .localFile, code: "LocalFileError", message: "/photos/a.jpg: permission denied")
        #expect(local.description == "failed: /photos/a.jpg: permission denied. " + local.advice)
    }
}
