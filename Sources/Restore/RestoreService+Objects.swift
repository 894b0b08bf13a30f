import Account
import Bucket
import Control
import Foundation

/// Where objects stand (HEAD), and asking archived ones back (`RestoreObject`).
extension RestoreService {
    /// One status per MD5 asked; `thaw` also asks every archived one back.
    package func objects(_ query: ObjectQuery, thaw: Bool) async -> ControlResponse {
        guard query.md5s.count <= ObjectQuery.maxBatch else {
            return .error(400, "bad_request", "at most \(ObjectQuery.maxBatch) objects a call")
        }
        guard query.md5s.allSatisfy(Self.isMD5) else { return .error(400, "bad_request", "md5s must be 32 lowercase hex digits") }
        let reached = await access()
        guard case .ready(let grant, let userId) = reached else {
            if case .unavailable(let response) = reached { return response }
            return .error(503, "unavailable", "the bucket cannot be reached now")
        }
        let limit = options.headConcurrency
        let statuses = await withTaskGroup(of: (Int, ObjectStatus).self) { group in
            var out = [ObjectStatus?](repeating: nil, count: query.md5s.count)
            var next = 0
            func launch() {
                guard next < query.md5s.count else { return }
                let (i, md5) = (next, query.md5s[next])
                next += 1
                group.addTask { (i, await self.status(of: md5, grant: grant, userId: userId, thaw: thaw)) }
            }
            for _ in 0..<min(limit, query.md5s.count) { launch() }
            for await (i, status) in group {
                out[i] = status
                launch()
            }
            return out.compactMap { $0 }
        }
        return .json(ObjectStatusList(objects: statuses))
    }

    func status(of md5: String, grant: STSGrant, userId: String, thaw: Bool) async -> ObjectStatus {
        let key = "photos/\(userId)/\(md5).dat"
        var attempt = 0
        var refreshed = false
        while true {
            do {
                let (client, credentials) = try client(grant, prefix: "photos/\(userId)/")
                guard let info = try await client.headObject(key: key, credentials: credentials) else {
                    return ObjectStatus(md5: md5, state: .missing)
                }
                let storageClass = info.storageClass ?? "STANDARD"
                guard info.needsRestore else { return ObjectStatus(md5: md5, state: .ready, size: info.size, storageClass: storageClass) }
                if info.restore == .inProgress { return ObjectStatus(md5: md5, state: .restoring, size: info.size, storageClass: storageClass) }
                guard thaw else { return ObjectStatus(md5: md5, state: .archived, size: info.size, storageClass: storageClass) }
                switch try await client.restoreObject(key: key, days: options.thawDays, credentials: credentials) {
                case .available: return ObjectStatus(md5: md5, state: .ready, size: info.size, storageClass: storageClass)
                case .started, .inProgress:
                    logger.info("asked an archived object back", metadata: ["key": "\(key)", "class": "\(storageClass)"])
                    return ObjectStatus(md5: md5, state: .restoring, size: info.size, storageClass: storageClass)
                }
            } catch {
                if await shouldRetry(error, grant: grant, attempt: &attempt, refreshed: &refreshed) { continue }
                return ObjectStatus(md5: md5, state: .unknown, message: error.description)
            }
        }
    }

    static func isMD5(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }
}

/// The whole `photos/{userId}/` listing, for a restore that wants most of the bucket:
/// one request per 1,000 objects instead of a HEAD per object.
extension RestoreService {
    /// `GET /v1/restore/listing`: one line per object, `md5 size storageClass`, streamed a
    /// page at a time (the daemon holds one page), then `end` on a line of its own.
    package func listing() async -> ControlResponse {
        let reached = await access()
        guard case .ready(let grant, let userId) = reached else {
            if case .unavailable(let response) = reached { return response }
            return .error(503, "unavailable", "the bucket cannot be reached now")
        }
        let prefix = "photos/\(userId)/"
        return .stream { writer in
            var token: String?
            var begun = false
            var attempt = 0
            var refreshed = false
            var grant = grant
            while true {
                let page: S3Client.ListPage
                do throws(S3Error) {
                    let (client, credentials) = try await self.client(grant, prefix: prefix)
                    page = try await client.listObjects(prefix: prefix, continuationToken: token, credentials: credentials)
                } catch {
                    guard await self.shouldRetry(error, grant: grant, attempt: &attempt, refreshed: &refreshed) else {
                        if !begun { await writer.respond(.error(502, "storage_error", "could not list \(prefix): \(error)")) }
                        return
                    }
                    if refreshed, let fresh = try? await self.account.credentials() { grant = fresh }
                    continue
                }
                attempt = 0
                var text = ""
                for o in page.objects {
                    let name = o.key.dropFirst(prefix.count)
                    guard name.hasSuffix(".dat"), Self.isMD5(String(name.dropLast(4))) else { continue }
                    text += "\(name.dropLast(4)) \(o.size) \(o.storageClass)\n"
                }
                token = page.nextContinuationToken
                if token == nil { text += "end\n" }
                do {
                    if !begun {
                        try await writer.begin(contentType: "text/plain", contentLength: nil)
                        begun = true
                    }
                    try await writer.write(Array(text.utf8))
                    if token == nil {
                        try await writer.finish()
                        return
                    }
                } catch {
                    return
                }
            }
        }
    }
}
