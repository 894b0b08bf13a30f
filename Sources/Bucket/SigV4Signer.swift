#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Digests
import Foundation

/// AWS Signature Version 4 for the `Authorization` header, as a pure value: no I/O, no
/// clock (the caller passes the date, already corrected by its clock offset), and every
/// intermediate string is kept so a `SignatureDoesNotMatch` can be diagnosed by comparing
/// against the canonical request the server echoes back.
///
/// Paths are given as they appear on the request line (percent-encoded). For S3 the
/// canonical URI is that path with its encoding normalised to AWS's rules (one
/// encoding, no dot-segment removal: `a/../b` and `a//b` are distinct object keys).
/// Every other service gets RFC 3986 dot-segment removal and a second encoding, as
/// AWS's generic signing rules require.
package struct SigV4Signer: Sendable, Equatable {
    package static let algorithm = "AWS4-HMAC-SHA256"
    /// The payload hash to sign when the body is not hashed (over TLS, where Content-MD5
    /// still guards the bytes).
    package static let unsignedPayload = "UNSIGNED-PAYLOAD"
    /// SHA-256 of the empty string: the payload hash of GET, HEAD and DELETE.
    package static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    package var region: String
    package var service: String
    /// S3's canonical-URI rules (single encoding, no normalisation). Defaults to `service == "s3"`.
    package var usesS3PathRules: Bool
    /// Send and sign `x-amz-content-sha256` (S3 requires it). Defaults to `service == "s3"`.
    package var signsContentSHA256Header: Bool

    package init(region: String, service: String = "s3") {
        self.region = region
        self.service = service
        usesS3PathRules = service == "s3"
        signsContentSHA256Header = service == "s3"
    }

    package struct Header: Sendable, Equatable {
        package var name: String
        package var value: String

        package init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// One query parameter, not encoded. A nil value is a bare name (`?uploads`), which
    /// signs as `uploads=`.
    package struct QueryItem: Sendable, Equatable {
        package var name: String
        package var value: String?

        package init(_ name: String, _ value: String? = nil) {
            self.name = name
            self.value = value
        }
    }

    /// Everything signing produced. `headersToAdd` are what the request must carry on top
    /// of the headers that were signed; `requestTarget` is the path and query exactly as
    /// they were signed, for the request line.
    package struct Signature: Sendable, Equatable {
        package var canonicalRequest: String
        package var stringToSign: String
        package var signature: String
        package var signedHeaders: String
        package var credentialScope: String
        package var amzDate: String
        package var authorization: String
        package var headersToAdd: [Header]
        package var canonicalURI: String
        package var canonicalQuery: String
        package var requestTarget: String
    }

    /// Signs one request.
    ///
    /// - Parameters:
    ///   - path: the path as on the request line, percent-encoded (use `encodePath(_:)`
    ///     to build it from an object key); no query.
    ///   - query: the query parameters, not encoded.
    ///   - headers: every header to sign, including `Host`. `X-Amz-Date`,
    ///     `X-Amz-Content-Sha256` (S3) and `X-Amz-Security-Token` (when the credentials have
    ///     a session token) are added here and replace any passed in.
    ///   - payloadHash: lowercase hex SHA-256 of the body, or `unsignedPayload`.
    ///   - date: the signing time; callers apply their clock offset before passing it.
    package func sign(method: String, path: String, query: [QueryItem] = [], headers: [Header],
                     payloadHash: String, credentials: S3Credentials, date: Date) -> Signature {
        let amzDate = Self.amzDate(date)
        let day = String(amzDate.prefix(8))

        var added: [Header] = [Header("X-Amz-Date", amzDate)]
        if signsContentSHA256Header {
            added.append(Header("X-Amz-Content-Sha256", payloadHash))
        }
        if let token = credentials.sessionToken, !token.isEmpty {
            added.append(Header("X-Amz-Security-Token", token))
        }
        let replaced = Set(added.map { $0.name.lowercased() } + ["authorization"])
        let toSign = headers.filter { !replaced.contains(Self.trimmed($0.name).lowercased()) } + added

        let (canonicalHeaders, signedHeaders) = Self.canonicalHeaders(toSign)
        let canonicalURI = self.canonicalURI(path)
        let canonicalQuery = Self.canonicalQuery(query)
        let canonicalRequest = [
            method.uppercased(), canonicalURI, canonicalQuery, canonicalHeaders, signedHeaders, payloadHash,
        ].joined(separator: "\n")

        let credentialScope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = [
            Self.algorithm, amzDate, credentialScope, SHA256.hexDigest(canonicalRequest),
        ].joined(separator: "\n")

        let key = signingKey(secret: credentials.secretAccessKey, day: day)
        let signature = HMACSHA256.hexAuthenticationCode(key: key, message: stringToSign)
        let authorization = "\(Self.algorithm) Credential=\(credentials.accessKeyId)/\(credentialScope), "
            + "SignedHeaders=\(signedHeaders), Signature=\(signature)"

        let wireQuery = Self.wireQuery(query)
        return Signature(
            canonicalRequest: canonicalRequest, stringToSign: stringToSign, signature: signature,
            signedHeaders: signedHeaders, credentialScope: credentialScope, amzDate: amzDate,
            authorization: authorization, headersToAdd: added + [Header("Authorization", authorization)],
            canonicalURI: canonicalURI, canonicalQuery: canonicalQuery,
            requestTarget: (path.isEmpty ? "/" : path) + (wireQuery.isEmpty ? "" : "?" + wireQuery))
    }

    /// kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, day), region), service), "aws4_request").
    package func signingKey(secret: String, day: String) -> [UInt8] {
        var key = HMACSHA256.authenticationCode(key: Array(("AWS4" + secret).utf8), message: day)
        key = HMACSHA256.authenticationCode(key: key, message: region)
        key = HMACSHA256.authenticationCode(key: key, message: service)
        return HMACSHA256.authenticationCode(key: key, message: "aws4_request")
    }

    // MARK: - Canonical pieces

    package func canonicalURI(_ path: String) -> String {
        let path = path.isEmpty ? "/" : path
        if usesS3PathRules {
            // Re-encoding each decoded segment is the identity for a path built with
            // `encodePath`, and fixes a hand-written one (`/test$file.text`) the way S3
            // itself canonicalises it. Splitting first keeps an encoded `%2F` inside its segment.
            return path.split(separator: "/", omittingEmptySubsequences: false)
                .map { Self.uriEncode(Self.percentDecode(Substring($0)), encodeSlash: true) }
                .joined(separator: "/")
        }
        return Self.removeDotSegments(path)
            .split(separator: "/", omittingEmptySubsequences: false)
            .map { Self.uriEncode(Array($0.utf8), encodeSlash: true) }
            .joined(separator: "/")
    }

    /// Parameters sorted by encoded name, then encoded value (byte order), each encoded
    /// with AWS's rules (everything but unreserved characters, `/` and `=` included).
    package static func canonicalQuery(_ items: [QueryItem]) -> String {
        encodedSorted(items).map { "\($0.name)=\($0.value ?? "")" }.joined(separator: "&")
    }

    /// The query as sent: the canonical order and encoding, but a bare name stays bare
    /// (some servers tell `?uploads` from `?uploads=`).
    package static func wireQuery(_ items: [QueryItem]) -> String {
        encodedSorted(items).map { item in item.value.map { "\(item.name)=\($0)" } ?? item.name }
            .joined(separator: "&")
    }

    private static func encodedSorted(_ items: [QueryItem]) -> [QueryItem] {
        let encoded = items.map { QueryItem(uriEncode($0.name, encodeSlash: true),
                                            $0.value.map { uriEncode($0, encodeSlash: true) }) }
        return encoded.sorted { a, b in
            if a.name != b.name { return a.name.utf8.lexicographicallyPrecedes(b.name.utf8) }
            return (a.value ?? "").utf8.lexicographicallyPrecedes((b.value ?? "").utf8)
        }
    }

    /// Lowercased names sorted by byte order, values trimmed with inner runs of
    /// whitespace collapsed to one space, repeated names joined with commas in the order
    /// given. Returns the block (each line ending in a newline) and the signed-headers list.
    package static func canonicalHeaders(_ headers: [Header]) -> (block: String, signedHeaders: String) {
        var order: [String] = []
        var values: [String: [String]] = [:]
        for header in headers {
            let name = trimmed(header.name).lowercased()
            if values[name] == nil { order.append(name) }
            values[name, default: []].append(collapsedWhitespace(header.value))
        }
        let names = order.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let block = names.map { "\($0):\(values[$0]!.joined(separator: ","))\n" }.joined()
        return (block, names.joined(separator: ";"))
    }

    // MARK: - Encoding

    /// AWS's URI encoding: every byte but `A–Z a–z 0–9 - . _ ~` as `%XX` (upper-case hex);
    /// `/` kept when `encodeSlash` is false (object keys in paths).
    package static func uriEncode(_ text: String, encodeSlash: Bool) -> String {
        uriEncode(Array(text.utf8), encodeSlash: encodeSlash)
    }

    /// The request-line path for an object key: every segment encoded once, `/` kept.
    package static func encodePath(_ key: String) -> String {
        uriEncode(key, encodeSlash: false)
    }

    static func uriEncode(_ bytes: [UInt8], encodeSlash: Bool) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            case UInt8(ascii: "/") where !encodeSlash:
                out.append(byte)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0f)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Bytes of a percent-encoded string; a `%` not followed by two hex digits is literal.
    static func percentDecode(_ text: Substring) -> [UInt8] {
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count,
               let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2]) {
                out.append(hi << 4 | lo)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return out
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// RFC 3986 §5.2.4 for an absolute path, plus collapsing empty segments, which is what
    /// AWS's generic services do (`//example//` signs as `/example/`).
    static func removeDotSegments(_ path: String) -> String {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        var kept: [Substring] = []
        for part in parts {
            switch part {
            case "", ".": continue
            case "..": _ = kept.popLast()
            default: kept.append(part)
            }
        }
        let endsInDirectory = path.hasSuffix("/") || parts.last == "." || parts.last == ".."
        let joined = "/" + kept.joined(separator: "/")
        return endsInDirectory && !kept.isEmpty ? joined + "/" : joined
    }

    // MARK: - Text helpers

    private static func isWhitespace(_ c: Character) -> Bool {
        c == " " || c == "\t" || c == "\r" || c == "\n"
    }

    static func trimmed(_ text: String) -> String {
        let scalars = text.unicodeScalars
        guard let start = scalars.firstIndex(where: { !isWhitespace(Character($0)) }),
              let end = scalars.lastIndex(where: { !isWhitespace(Character($0)) }) else { return "" }
        return String(scalars[start...end])
    }

    static func collapsedWhitespace(_ text: String) -> String {
        text.split(whereSeparator: isWhitespace).joined(separator: " ")
    }

    /// `YYYYMMDD'T'HHMMSS'Z'` in UTC; `gmtime_r` rather than a DateFormatter, which is
    /// neither cheap nor safe to share across threads.
    package static func amzDate(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))"
            + "T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
    }
}
