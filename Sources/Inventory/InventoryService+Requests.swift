import Backend
import Bucket
import Foundation
import PhotolalaCore
import ServiceLifecycle

/// S3 requests with the account's credentials: refreshed once when S3 refuses them,
/// signed with S3's clock once when it says ours is off, and tried again in place a few
/// times when S3 (or the way to it) fails. Listing and reading are idempotent, so an
/// answer cut short is simply asked again.
extension InventoryService {
    /// Why a request gave up without an S3 answer to show.
    enum Interrupted: Error {
        /// Signed out, paused by the account, or stopping: nothing to report.
        case unavailable
    }

    static let requestRetries = 4
    static let requestBackoff = Backoff(base: 0.5, cap: 4, jitter: .full, floor: 0.2)

    /// Runs `operation` with a client limited to `prefix`.
    func request<T: Sendable>(prefix: String,
                              _ operation: (S3Client, S3Credentials) async throws(S3Error) -> T) async throws -> T {
        var credentialRetries = 0
        var skewRetries = 0
        var transientRetries = 0
        while true {
            // A stop does not wait for the rest of a long listing: it starts over next time.
            if Task.isCancelled || Task.isShuttingDownGracefully { throw Interrupted.unavailable }
            let grant: STSGrant
            do {
                grant = try await account.credentials()
            } catch {
                throw Interrupted.unavailable
            }
            let client = try S3Client(configuration: grant.s3Configuration(keyPrefix: prefix, trust: options.trust),
                                      httpClient: http, clockOffset: clockOffset, logger: logger)
            let credentials = grant.s3Credentials
            do {
                return try await operation(client, credentials)
            } catch {
                switch error.kind {
                case .credentialsExpired where credentialRetries == 0:
                    credentialRetries += 1
                    await account.rejectedByS3(grant)
                case .clockSkew where skewRetries == 0:
                    skewRetries += 1
                    if let offset = error.clockOffset() { clockOffset = offset }
                case .transient where transientRetries < Self.requestRetries:
                    transientRetries += 1
                    logger.info("S3 request failed; trying again", metadata: ["why": "\(error)", "try": "\(transientRetries + 1)"])
                    try? await Task.sleep(for: Backoff.duration(Self.requestBackoff.delay(after: transientRetries, random: .random(in: 0..<1))))
                case .cancelled:
                    throw Interrupted.unavailable
                default:
                    throw error
                }
            }
        }
    }
}
