import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// Reading objects back: small ones whole (a catalog pointer, a manifest segment), big
/// ones streamed a buffer at a time (a restore, `verify --deep`), so memory stays flat.
extension S3Client {
    /// What a GET answered besides the bytes.
    package struct ObjectHead: Sendable, Equatable {
        /// Without the quotes.
        package var etag: String
        /// Bytes in this answer (the range's length for a ranged GET).
        package var contentLength: Int64
        /// The whole object's size (from `Content-Range` for a ranged GET).
        package var objectSize: Int64

        package init(etag: String, contentLength: Int64, objectSize: Int64) {
            self.etag = etag
            self.contentLength = contentLength
            self.objectSize = objectSize
        }
    }

    /// The whole object, which must fit in `maximumResponseBytes`.
    package func getObject(key: String, credentials: S3Credentials) async throws(S3Error) -> [UInt8] {
        let operation = "GetObject"
        try checkKey(key, operation: operation)
        let response = try await execute(Request(operation: operation, method: .GET, path: objectPath(key), key: key),
                                         credentials: credentials)
        guard response.status == 200 else { throw response.error(operation: operation, key: key) }
        return response.body
    }

    /// A small object and its ETag, or nil when there is no such key.
    package func getObjectIfPresent(key: String, credentials: S3Credentials) async throws(S3Error) -> (bytes: [UInt8], etag: String)? {
        let operation = "GetObject"
        try checkKey(key, operation: operation)
        let response = try await execute(Request(operation: operation, method: .GET, path: objectPath(key), key: key),
                                         credentials: credentials)
        switch response.status {
        case 200: return (response.body, Self.unquoted(response.header("ETag") ?? ""))
        case 404: return nil
        default: throw response.error(operation: operation, key: key)
        }
    }

    /// Streams the object (or the bytes `range`, both ends included) into `consume`, a
    /// buffer at a time, in order.
    ///
    /// - Parameter expectedBytes: how much is coming, for the deadline (see
    ///   `requestTimeout`); the range's length when a range is given.
    /// - Throws: `.notFound` for a missing key; `.localFile` (code `ConsumerFailed`) when
    ///   `consume` throws, with its error in the message; the transfer errors of `execute`.
    ///   - onHead: told the answer's head (the range's length, the object's size) before
    ///     the first byte, so a relay can announce the length it is about to send.
    package func getObject(key: String, range: ClosedRange<Int64>? = nil, expectedBytes: Int64 = 0,
                          credentials: S3Credentials,
                          onHead: (@Sendable (ObjectHead) async throws -> Void)? = nil,
                          consume: @Sendable (ByteBuffer) async throws -> Void) async throws(S3Error) -> ObjectHead {
        let operation = "GetObject"
        try checkKey(key, operation: operation)
        var headers: [SigV4Signer.Header] = []
        if let range { headers.append(.init("Range", "bytes=\(range.lowerBound)-\(range.upperBound)")) }
        let request = Request(operation: operation, method: .GET, path: objectPath(key), headers: headers, key: key)
        let timeout = requestTimeout(bodyBytes: range.map { $0.upperBound - $0.lowerBound + 1 } ?? expectedBytes)
        let response = try await send(request, credentials: credentials, timeout: timeout)
        let status = Int(response.status.code)
        let answer: [(name: String, value: String)] = response.headers.map { ($0.name, $0.value) }
        func header(_ name: String) -> String? {
            answer.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
        guard status == 200 || status == 206 else {
            let body = (try? await response.body.collect(upTo: configuration.maximumResponseBytes)).map { Array(buffer: $0) } ?? []
            throw S3Error.decode(status: status, headers: answer, body: body, operation: operation, key: key)
        }
        let length = header("Content-Length").flatMap { Int64($0) } ?? -1
        // "bytes 0-99/12345": the object's size is after the slash.
        let size = header("Content-Range").flatMap { $0.split(separator: "/").last }.flatMap { Int64($0) } ?? length
        var received: Int64 = 0
        do {
            if let onHead {
                do {
                    try await onHead(ObjectHead(etag: Self.unquoted(header("ETag") ?? ""), contentLength: length, objectSize: size))
                } catch {
                    throw ConsumerFailure(underlying: error)
                }
            }
            for try await buffer in response.body {
                received += Int64(buffer.readableBytes)
                do {
                    try await consume(buffer)
                } catch {
                    throw ConsumerFailure(underlying: error)
                }
            }
        } catch let failure as ConsumerFailure {
            throw S3Error(kind: .localFile, code: "ConsumerFailed", message: "\(failure.underlying)", operation: operation, key: key)
        } catch {
            throw Self.transportError(error, operation: operation, key: key, timeout: timeout)
        }
        guard length < 0 || received == length else {
            throw S3Error(kind: .transient, status: status, code: "IncompleteBody",
                          message: "the answer ended after \(received) of \(length) bytes", operation: operation, key: key)
        }
        return ObjectHead(etag: Self.unquoted(header("ETag") ?? ""), contentLength: received, objectSize: size)
    }

    private struct ConsumerFailure: Error {
        var underlying: any Error
    }
}
