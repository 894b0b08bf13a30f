import Bucket
import Foundation
import PhotolalaCore
import Queue

/// A listing pass: every page of a prefix recorded in its own transaction, then, once a
/// pass saw every key, what the bucket lost put back in the queue.
extension InventoryService {
    enum PassOutcome: Sendable, Equatable {
        case complete(startedAt: Date)
        /// S3 answered 403: the session policy does not allow listing.
        case refused(String)
        case failed(String)
        /// Signed out, paused by the account, or stopping.
        case interrupted
    }

    /// The periodic pass (and the first after a sign-in): the user's photos, with what
    /// they say about the objects the queue holds, then the thumbnails.
    @discardableResult
    func listEverything(userId: String, checkETags: Bool) async -> PassOutcome {
        passRunning = true
        defer { passRunning = false }
        let photos = Self.photosPrefix(userId)
        let outcome = await listPrefix(photos, userId: userId, matchObjects: true)
        if case .complete(let startedAt) = outcome {
            var found = DaemonStatus.Verify()
            do {
                try await compareUploaded(userId: userId, listingStartedAt: startedAt, checkETags: checkETags, into: &found)
                if found.missing + found.wrongSize > 0 {
                    logger.warning("the bucket lacks objects this NAS backed up: they are sent again", metadata: [
                        "missing": "\(found.missing)", "wrongSize": "\(found.wrongSize)", "queued": "\(found.requeued)",
                        "noFileLeft": "\(found.lost)"])
                }
            } catch {
                logger.error("cannot compare the listing with the queue: \(error)")
            }
        }
        await listPrefix(Self.thumbnailsPrefix(userId), userId: userId, matchObjects: false)
        return outcome
    }

    /// Lists `prefix` page by page. `matchObjects`: the photos prefix, whose keys name the
    /// objects of the queue (`photos/U/{md5}.dat`).
    @discardableResult
    func listPrefix(_ prefix: String, userId: String, matchObjects: Bool) async -> PassOutcome {
        let startedAt = Date()
        let keep = [Self.photosPrefix(userId), Self.thumbnailsPrefix(userId)]
        do {
            try database.beginListing(prefix: prefix, keep: keep, now: startedAt)
        } catch {
            logger.error("cannot record a listing in the queue database: \(error)")
            return .failed("the queue database: \(error)")
        }
        statusChanges.changed()
        var token: String?
        var pages = 0
        var seen = 0
        var marked = 0
        do {
            repeat {
                let from = token
                let page = try await request(prefix: prefix) { client, credentials throws(S3Error) in
                    try await client.listObjects(prefix: prefix, continuationToken: from, credentials: credentials)
                }
                let keys = page.objects
                marked += try database.recordListingPage(prefix: prefix, keys: keys, matchObjects: matchObjects)
                pages += 1
                seen += keys.count
                if verify.phase == .listing && matchObjects { verify.done = seen }
                token = page.nextContinuationToken
                statusChanges.changed()
            } while token != nil
            let (objects, removed) = try database.finishListing(prefix: prefix, startedAt: startedAt)
            logger.info("listed the bucket", metadata: [
                "prefix": "\(prefix)", "objects": "\(objects)", "pages": "\(pages)", "gone": "\(removed)",
                "alreadyBackedUp": "\(marked)", "seconds": "\(String(format: "%.1f", Date().timeIntervalSince(startedAt)))"])
            statusChanges.changed()
            return .complete(startedAt: startedAt)
        } catch is Interrupted {
            return .interrupted
        } catch let error as S3Error where error.kind == .forbidden {
            let why = "S3 refused to list \(prefix) (403 \(error.code)): the backend's session policy does not allow s3:ListBucket"
            logger.warning("\(why); uploads check each object with a HEAD instead")
            try? database.listingFailed(prefix: prefix, refused: true, error: why)
            statusChanges.changed()
            return .refused(why)
        } catch {
            let why = "listing \(prefix) failed after \(pages) page\(pages == 1 ? "" : "s"): \(error)"
            logger.warning("\(why); trying again later, uploads check with a HEAD meanwhile if no earlier listing is complete")
            try? database.listingFailed(prefix: prefix, refused: false, error: why)
            statusChanges.changed()
            return .failed(why)
        }
    }

    /// After a complete listing of the user's photos: every object the queue holds as
    /// uploaded (before the listing began) compared with it, a chunk at a time; what the
    /// bucket lacks or holds wrong goes back to be sent. Adds to `result`.
    func compareUploaded(userId: String, listingStartedAt: Date, checkETags: Bool, into result: inout DaemonStatus.Verify) async throws {
        let prefix = Self.photosPrefix(userId)
        var after: String?
        var askedAboutKMS = false
        while true {
            let chunk = try database.uploadedObjects(keyPrefix: prefix, after: after, limit: 1000)
            guard let last = chunk.last else { break }
            after = last.md5
            var verdicts = chunk.map {
                ObjectCheck.verdict($0, listingStartedAt: listingStartedAt, checkETags: checkETags, sseKms: result.sseKms)
            }
            // An ETag that is an MD5, but not the one of the bytes: wrong bytes, or SSE-KMS,
            // whose ETags are no MD5 at all. One HEAD tells which, before anything is re-sent.
            if checkETags, !askedAboutKMS, let i = verdicts.firstIndex(of: .wrongETag) {
                askedAboutKMS = true
                if await encryptsWithKMS(key: prefix + chunk[i].md5 + ".dat", prefix: prefix) {
                    result.sseKms = true
                    logger.notice("the bucket encrypts with SSE-KMS: its ETags are not MD5s, so only `verify --deep` proves the bytes")
                    verdicts = chunk.map { ObjectCheck.verdict($0, listingStartedAt: listingStartedAt, checkETags: true, sseKms: true) }
                }
            }
            var missing: [String] = []
            var wrong: [String] = []
            for (object, verdict) in zip(chunk, verdicts) {
                switch verdict {
                case .tooRecent: continue
                case .ok: break
                case .unproven: result.unproven += 1
                case .missing: result.missing += 1; missing.append(object.md5)
                case .wrongSize: result.wrongSize += 1; wrong.append(object.md5)
                case .wrongETag: result.wrongETag += 1; wrong.append(object.md5)
                }
                if verdict != .ok && verdict != .unproven && !object.hasLiveFile { result.lost += 1 }
                result.checked += 1
                if verdict != .ok && verdict != .unproven {
                    logger.info("not in the bucket as backed up", metadata: ["key": "\(prefix)\(object.md5).dat", "found": "\(verdict)"])
                }
            }
            result.mismatched = result.wrongSize + result.wrongETag + result.readBackWrong
            result.requeued += try database.requeue(missing, overwrite: false,
                                                    reason: "its object was not in the bucket any more: sending it again")
            result.requeued += try database.requeue(wrong, overwrite: true,
                                                    reason: "the bucket held other bytes under its key: sending it again")
            if verify.phase == .comparing { verify.done += chunk.count; verify.result = result; verify.result.running = true }
            statusChanges.changed()
            await Task.yield()
        }
    }

    /// Whether HEAD says `key` is encrypted with SSE-KMS (unknown counts as no).
    func encryptsWithKMS(key: String, prefix: String) async -> Bool {
        let info = try? await request(prefix: prefix) { client, credentials throws(S3Error) in
            try await client.headObject(key: key, credentials: credentials)
        }
        return info?.etagIsNotMD5 ?? false
    }
}
