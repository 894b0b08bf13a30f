import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import PhotolalaCore

/// One request on the wire: signed (SigV4, on the local clock plus the offset S3 reported),
/// sent with the deadline its body earns, its body streamed from the file, its answer read
/// whole or handed over; what a failure to get an answer means (`S3Error`), and the counts
/// every request adds to.
struct S3Exchange: Sendable {
    let httpClient: HTTPClient
    let configuration: S3Client.Configuration
    let target: S3Target
    let signer: SigV4Signer
    /// Seconds added to the local clock when signing.
    let clockOffset: TimeInterval
    let logger: Logger

    /// The deadline for a request carrying `bodyBytes`: the minimum plus the time the body
    /// takes at the minimum throughput.
    func timeout(bodyBytes: Int64) -> TimeInterval {
        configuration.minimumRequestTimeout + Double(max(0, bodyBytes)) / configuration.minimumThroughput
    }

    /// Signs and sends one request, and reads the whole (small) answer. Any status comes
    /// back; only a failure to get an answer throws.
    func execute(_ request: S3Request, credentials: S3Credentials, signer: SigV4Signer? = nil) async throws(S3Error) -> S3Response {
        let timeout = timeout(bodyBytes: request.body.count)
        let started = ContinuousClock.now
        let response = try await send(request, credentials: credentials, signer: signer, timeout: timeout)
        do {
            let body = try await response.body.collect(upTo: configuration.maximumResponseBytes)
            let result = S3Response(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                                    body: Array(buffer: body), operation: request.operation, key: request.key)
            logger.debug("S3 request", metadata: [
                "operation": "\(request.operation)", "key": "\(request.key ?? "-")",
                "status": "\(result.status)", "request-id": "\(result.requestId ?? "-")",
                "bytes": "\(request.body.count)", "elapsed": "\(ContinuousClock.now - started)",
            ])
            return result
        } catch {
            // Counted when its answer began; the body breaking off is not a second request.
            throw failed(error, request, timeout: timeout, counted: true)
        }
    }

    /// Signs and sends one request; the answer's body is left for the caller to read.
    func send(_ request: S3Request, credentials: S3Credentials, signer: SigV4Signer? = nil,
              timeout: TimeInterval) async throws(S3Error) -> HTTPClientResponse {
        let signer = signer ?? self.signer
        let signed = [SigV4Signer.Header("Host", target.hostHeader)] + request.headers
        let signature = signer.sign(method: request.method.rawValue, path: request.path, query: request.query,
                                    headers: signed, payloadHash: request.payloadHash, credentials: credentials,
                                    date: Date().addingTimeInterval(clockOffset))

        var http = HTTPClientRequest(url: target.origin + signature.requestTarget)
        http.method = request.method
        if target.usesTLS { http.tlsConfiguration = configuration.trust.configuration }
        for header in signed + signature.headersToAdd {
            http.headers.add(name: header.name, value: header.value)
        }
        switch request.body {
        case .none:
            // S3 wants a length on every POST and PUT, even an empty one.
            if request.method == .POST || request.method == .PUT { http.body = .bytes(ByteBuffer()) }
        case let .bytes(bytes):
            http.body = .bytes(ByteBuffer(bytes: bytes))
        case let .file(file, offset, length):
            http.body = length == 0 ? .bytes(ByteBuffer())
                : .stream(FileChunks(file: file, offset: offset, length: length, chunkSize: configuration.chunkSize),
                          length: .known(length))
        }

        do {
            let response = try await httpClient.execute(http, timeout: .milliseconds(Int64(timeout * 1000)), logger: logger)
            Self.count(request, status: Int(response.status.code))
            return response
        } catch {
            var failure = failed(error, request, timeout: timeout)
            if let why = await configuration.trust.explain(error, host: target.connectHost, port: target.connectPort) {
                // Retried like any network failure: a certificate gets renewed, a clock fixed.
                failure = S3Error(kind: .transient, code: "TLSFailure", message: why,
                                  operation: request.operation, key: request.key)
            }
            throw failure
        }
    }

    private func failed(_ error: any Error, _ request: S3Request, timeout: TimeInterval, counted: Bool = false) -> S3Error {
        let failure = Self.transportError(error, operation: request.operation, key: request.key, timeout: timeout)
        if !counted && failure.kind != .cancelled && failure.kind != .localFile { Self.count(request, status: nil) }
        logger.debug("S3 request failed", metadata: [
            "operation": "\(request.operation)", "key": "\(request.key ?? "-")", "error": "\(failure.code)",
        ])
        return failure
    }

    /// Requests by operation and status class, 403s, and the bytes that went out (a
    /// request that got no answer may still have sent its body).
    private static func count(_ request: S3Request, status: Int?) {
        DaemonCounter.s3Requests.increment(request.operation, status.map(DaemonCounter.statusClass) ?? "error")
        if status == 403 { DaemonCounter.s3ForbiddenResponses.increment(request.operation) }
        DaemonCounter.s3SentBytes.increment(by: request.body.count)
    }

    /// What a failure to get (or read) an answer means.
    static func transportError(_ error: any Error, operation: String, key: String?, timeout: TimeInterval) -> S3Error {
        if let error = error as? S3Error { return error }
        if let error = error as? FileChunks.ReadFailure {
            return S3Error(kind: .localFile, code: "LocalFileError", message: error.description,
                           operation: operation, key: key)
        }
        if error is CancellationError || (error as? HTTPClientError) == .cancelled || Task.isCancelled {
            return S3Error(kind: .cancelled, code: "Cancelled", message: "cancelled", operation: operation, key: key)
        }
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded:
                return S3Error(kind: .transient, code: "Timeout",
                               message: "no answer within \(Int(timeout)) s (the body-size-scaled deadline)",
                               operation: operation, key: key)
            case .connectTimeout, .readTimeout, .writeTimeout, .tlsHandshakeTimeout, .getConnectionFromPoolTimeout:
                return S3Error(kind: .transient, code: "Timeout", message: "\(error)", operation: operation, key: key)
            case .invalidURL, .emptyHost, .emptyScheme, .alreadyShutdown, .bodyLengthMismatch:
                return S3Error(kind: .permanent, code: "InvalidRequest", message: "\(error)",
                               operation: operation, key: key)
            default:
                break
            }
        }
        // Refused, reset, unreachable, DNS, TLS: the network, which comes back.
        return S3Error(kind: .transient, code: "NetworkError", message: "\(error)", operation: operation, key: key)
    }
}
