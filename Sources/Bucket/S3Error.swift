import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// Everything an S3 call can fail with, classified by what the caller should do next.
///
/// S3 answers most failures with an XML body (`<Error><Code>…`); HEAD answers have no
/// body, so their code is synthesised from the status. Transport failures (refused,
/// timed out, reset), a local file that cannot be read and cancellation are folded in
/// too, so an uploader has one type to switch on.
package struct S3Error: Error, Sendable, Equatable, CustomStringConvertible {
    package enum Kind: String, Sendable, Equatable {
        /// Retry with backoff: 5xx, throttling, timeouts, a dropped connection.
        case transient
        /// The STS credentials expired or were revoked: refresh them, then retry.
        case credentialsExpired
        /// The local clock is too far from S3's: set the client's clock offset from
        /// `serverDate` (see `clockOffset(localNow:)`) and retry.
        case clockSkew
        /// Denied by policy. On HEAD this means "unknown": upload anyway.
        case forbidden
        /// No such key, upload or bucket. NoSuchUpload means start the multipart upload again.
        case notFound
        /// The body did not match its Content-MD5: the file changed while it was sent. Hash again.
        case contentMismatch
        /// The file could not be opened or read (vanished, shrank, permissions).
        case localFile
        /// The task was cancelled (shutdown, pause).
        case cancelled
        /// No credentials to sign with: signed out, paused by the account, or stopping
        /// (`BucketSession` says so before sending anything).
        case unavailable
        /// A conditional request's condition did not hold (412): `If-None-Match: *` found the
        /// key already there, or `If-Match` found another ETag. The caller decides what
        /// that means (already uploaded; someone published in between).
        case preconditionFailed
        /// Retrying the same request will fail the same way.
        case permanent
    }

    package var kind: Kind
    /// HTTP status; nil when no response arrived.
    package var status: Int?
    /// S3's error code (`AccessDenied`, `SlowDown`, …) or a local one (`NetworkError`,
    /// `Timeout`, `LocalFileError`, `Cancelled`, `MalformedResponse`, `InvalidRequest`).
    package var code: String
    package var message: String
    /// `x-amz-request-id`: what AWS support asks for.
    package var requestId: String?
    /// `x-amz-id-2`, the extended request id.
    package var hostId: String?
    /// The server's `Date` header (or `<ServerTime>`): what a clock offset is computed from.
    package var serverDate: Date?
    /// The S3 operation (`PutObject`, `UploadPart`, …), for the log line.
    package var operation: String?
    package var key: String?

    package init(kind: Kind, status: Int? = nil, code: String, message: String, requestId: String? = nil,
                hostId: String? = nil, serverDate: Date? = nil, operation: String? = nil, key: String? = nil) {
        self.kind = kind
        self.status = status
        self.code = code
        self.message = message
        self.requestId = requestId
        self.hostId = hostId
        self.serverDate = serverDate
        self.operation = operation
        self.key = key
    }

    /// Seconds to add to the local clock to match S3's (server time minus `localNow`).
    package func clockOffset(localNow: Date = Date()) -> TimeInterval? {
        serverDate.map { $0.timeIntervalSince(localNow) }
    }

    package var description: String {
        var text = operation.map { "\($0) " } ?? ""
        if let key { text += "\(key) " }
        text += "failed: "
        if let status {
            text += "S3 answered \(status) \(code)"
            if !message.isEmpty { text += ": \(message)" }
        } else {
            text += message.isEmpty ? code : message
        }
        if let requestId { text += " (request id \(requestId))" }
        return text + ". " + advice
    }

    /// What the user (or the daemon on their behalf) should do.
    package var advice: String {
        switch kind {
        case .transient:
            return "This is temporary; the upload will be retried with backoff."
        case .credentialsExpired:
            return "The temporary S3 credentials expired or were revoked; the daemon fetches new ones and retries. "
                + "If this repeats, check the NAS can reach the Photolala backend and run `photolalactl status`."
        case .clockSkew:
            return "The NAS clock is off by more than S3 allows (15 minutes); the daemon corrects for it, "
                + "but enable NTP (`timedatectl set-ntp true`) to fix it for good."
        case .forbidden:
            return "The credentials are not allowed to do this: the key must stay under photos/<userId>/. "
                + "If the subscription lapsed or the account was revoked, sign in again with `photolalactl login`."
        case .notFound:
            if code == "NoSuchUpload" {
                return "The multipart upload was aborted or expired; it will be started again."
            }
            if code == "NoSuchBucket" {
                return "The bucket does not exist: check the endpoint and bucket the backend vends."
            }
            return "The object does not exist."
        case .contentMismatch:
            return "The bytes S3 received do not match their MD5: the file probably changed during the upload; "
                + "it will be hashed again once it settles."
        case .localFile:
            return "Check the file still exists and the daemon's user can read it."
        case .cancelled:
            return "The upload was interrupted and will resume later."
        case .unavailable:
            return "Nothing is sent while photolalad is signed out or paused: see `photolalactl status`."
        case .preconditionFailed:
            return "The object changed or appeared since it was last read; the daemon reads it again."
        case .permanent:
            if code == "SignatureDoesNotMatch" {
                return "S3 rejected the request signature: a proxy may be rewriting requests, or the secret key "
                    + "is wrong. Report this with the request id if it persists."
            }
            if code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed" {
                return "The bucket is in another region than the one configured: check the region the backend vends."
            }
            if code == "EntityTooLarge" || code == "EntityTooSmall" {
                return "The part size breaks S3's limits (5 MiB to 5 GiB, at most 10,000 parts): check upload.part_size."
            }
            return "Retrying will not help; the file is marked failed. Report this with the request id if unexpected."
        }
    }

    // MARK: - Classification

    package static func classify(status: Int?, code: String) -> Kind {
        switch code {
        case "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "Throttling",
             "ThrottlingException", "RequestThrottled", "TooManyRequests", "IncompleteBody",
             "OperationAborted", "RequestTimeoutException", "NetworkError", "Timeout":
            return .transient
        case "ExpiredToken", "InvalidToken", "TokenRefreshRequired", "ExpiredTokenException",
             "InvalidAccessKeyId":
            return .credentialsExpired
        case "RequestTimeTooSkewed", "RequestExpired":
            return .clockSkew
        case "BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch":
            return .contentMismatch
        case "NoSuchKey", "NoSuchUpload", "NoSuchBucket", "NotFound":
            return .notFound
        case "AccessDenied", "AllAccessDisabled", "AccountProblem", "Forbidden":
            return .forbidden
        case "SignatureDoesNotMatch", "PermanentRedirect", "AuthorizationHeaderMalformed":
            return .permanent
        case "PreconditionFailed": return .preconditionFailed
        // S3 answers 409 when two conditional writes race on one key: try again.
        case "ConditionalRequestConflict": return .transient
        case "LocalFileError": return .localFile
        case "Cancelled": return .cancelled
        default: break
        }
        switch status {
        case .some(500...599), .some(429), .some(408): return .transient
        case .some(404): return .notFound
        case .some(412): return .preconditionFailed
        case .some(403): return .forbidden
        case .none: return .transient
        default: return .permanent
        }
    }

    // MARK: - Decoding responses

    /// Builds the error for a failed response. `body` may be empty (HEAD) or not XML (a
    /// proxy's HTML page): the status then decides, and `x-amz-error-code` is used when
    /// S3 sent it.
    package static func decode(status: Int, headers: [(name: String, value: String)], body: [UInt8],
                              operation: String? = nil, key: String? = nil) -> S3Error {
        func header(_ name: String) -> String? {
            headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
        let document = ErrorDocument.parse(body)
        let code = document?.code ?? header("x-amz-error-code") ?? syntheticCode(status: status)
        var message = document?.message ?? header("x-amz-error-message") ?? ""
        if message.isEmpty, document == nil, !body.isEmpty {
            let text = String(decoding: body.prefix(200), as: UTF8.self)
            // Not S3 XML: likely a proxy or load balancer page; a snippet tells which.
            message = "unexpected response body: " + text.split(whereSeparator: \.isNewline).joined(separator: " ")
        }
        let serverDate = header("Date").flatMap(parseHTTPDate) ?? document?.serverTime.flatMap(parseISO8601)
        return S3Error(kind: classify(status: status, code: code), status: status, code: code, message: message,
                       requestId: document?.requestId ?? header("x-amz-request-id"),
                       hostId: document?.hostId ?? header("x-amz-id-2"),
                       serverDate: serverDate, operation: operation, key: key)
    }

    static func syntheticCode(status: Int) -> String {
        switch status {
        case 400: "BadRequest"
        case 403: "Forbidden"
        case 404: "NotFound"
        case 405: "MethodNotAllowed"
        case 409: "Conflict"
        case 412: "PreconditionFailed"
        case 500: "InternalError"
        case 503: "ServiceUnavailable"
        default: "HTTP\(status)"
        }
    }

    /// The fields of an `<Error>` document. Also what a 200 answer to
    /// CompleteMultipartUpload carries when the completion failed after the status was sent.
    package struct ErrorDocument: Sendable, Equatable {
        package var code: String
        package var message: String?
        package var requestId: String?
        package var hostId: String?
        package var serverTime: String?

        /// Nil unless `body` is XML whose root element is `Error`.
        package static func parse(_ body: [UInt8]) -> ErrorDocument? {
            guard let root = S3XMLElement.parse(body), root.name == "Error" else { return nil }
            return ErrorDocument(code: root.childText("Code") ?? "UnknownError", message: root.childText("Message"),
                                 requestId: root.childText("RequestId"), hostId: root.childText("HostId"),
                                 serverTime: root.childText("ServerTime"))
        }
    }

    /// An HTTP date as servers send it ("Sat, 28 Nov 2026 12:53:38 GMT"), read by the
    /// ISO 8601 parser below; another form (RFC 850, asctime) goes through `DateFormatter`.
    static func parseHTTPDate(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        if parts.count == 6, parts[5] == "GMT", parts[1].count == 2, parts[3].count == 4, parts[4].count == 8,
           let month = months[String(parts[2])] {
            return parseISO8601("\(parts[3])-\(month)-\(parts[1])T\(parts[4])Z")
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text)
    }

    private static let months = ["Jan": "01", "Feb": "02", "Mar": "03", "Apr": "04", "May": "05", "Jun": "06",
                                 "Jul": "07", "Aug": "08", "Sep": "09", "Oct": "10", "Nov": "11", "Dec": "12"]

    /// A listing's `LastModified` ("2026-11-28T12:53:38.000Z", or without the fraction).
    /// The format style, not `ISO8601DateFormatter`: a new formatter per key cost about
    /// 110 µs (ICU builds one each time), 57 % of a 100,000-object listing's CPU
    /// (docs/benchmarks.md); this one parses in half a microsecond, with or without the
    /// fraction.
    static func parseISO8601(_ text: String) -> Date? {
        try? iso8601.parse(text)
    }

    private static let iso8601 = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
}

/// A minimal element tree over FoundationXML's `XMLParser`: S3's responses are small and
/// shallow, and a tree keeps each response's decoding a few lines of lookups.
package struct S3XMLElement: Sendable, Equatable {
    var name: String
    var text: String
    var children: [S3XMLElement]

    package func child(_ name: String) -> S3XMLElement? {
        children.first { $0.name == name }
    }

    func children(_ name: String) -> [S3XMLElement] {
        children.filter { $0.name == name }
    }

    /// The trimmed text of the first child called `name`.
    package func childText(_ name: String) -> String? {
        child(name).map { $0.text.trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    /// The root element, or nil when `bytes` are not well-formed XML.
    package static func parse(_ bytes: [UInt8]) -> S3XMLElement? {
        // S3 may pad a slow CompleteMultipartUpload answer with leading whitespace.
        guard let start = bytes.firstIndex(where: { !($0 == 0x20 || $0 == 0x0a || $0 == 0x0d || $0 == 0x09) }),
              bytes[start] == UInt8(ascii: "<") else { return nil }
        let parser = XMLParser(data: Data(bytes[start...]))
        parser.shouldResolveExternalEntities = false
        let builder = TreeBuilder()
        parser.delegate = builder
        guard parser.parse(), builder.stack.isEmpty else { return nil }
        return builder.root
    }

    private final class TreeBuilder: NSObject, XMLParserDelegate {
        var stack: [S3XMLElement] = []
        var root: S3XMLElement?

        func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                    qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]) {
            stack.append(S3XMLElement(name: elementName, text: "", children: []))
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            guard !stack.isEmpty else { return }
            stack[stack.count - 1].text += string
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?,
                    qualifiedName qName: String?) {
            guard let element = stack.popLast() else { return }
            if stack.isEmpty {
                root = element
            } else {
                stack[stack.count - 1].children.append(element)
            }
        }
    }
}
