/// BucketTesting: a bucket in memory behind the real `Bucket` protocol, a fixed grant
/// source and a test clock, so a Swift test runs a stage in-process in seconds.
import Bucket
import Digests
import Foundation
import NIOCore
import PhotolalaCore
import Synchronization

/// A bucket held in memory, reached the way the daemon reaches S3: through a
/// `BucketSession` (it is the session's transport), signed with a grant, limited to the
/// session's key prefix. It answers as S3 does — conditional writes, `Content-MD5`
/// checks, ETags (the MD5 of a single PUT, `md5-N` for a multipart upload), pages of at
/// most 1,000 keys — and fails on demand as S3 does: 503 storms, expired tokens (a bare
/// 400 on a HEAD), a server clock far from ours. Errors are made by `S3Error.decode` from
/// the status and XML body S3 would send, so they classify exactly like real ones.
package final class InMemoryBucket: BucketTransport {
    /// One stored object.
    package struct Object: Sendable, Equatable {
        package var bytes: [UInt8]
        /// Without quotes.
        package var etag: String
        package var contentType: String
        package var metadata: [String: String]
        /// nil: STANDARD.
        package var storageClass: String?
        package var lastModified: Date
        /// For an archived object: a restore asked for / finished.
        package var restore: S3Client.ObjectInfo.Restore?
    }

    /// A failure S3 may answer with.
    package enum Fault: Sendable, Equatable {
        /// 503 SlowDown.
        case slowDown
        /// 500 InternalError.
        case internalError
        /// The connection broke before an answer.
        case connectionReset
        /// 400 ExpiredToken (a bare 400 on a HEAD).
        case expiredToken
        /// 403 AccessDenied.
        case accessDenied
    }

    /// The condition a PUT was sent with.
    package enum WriteCondition: Sendable, Equatable {
        case none
        case ifMatch(String)
        case ifNoneMatch
    }

    private struct Upload {
        var key: String
        var contentType: String
        var metadata: [String: String]
        var storageClass: String?
        var parts: [Int: (bytes: [UInt8], etag: String)] = [:]
    }

    private struct Injected {
        var fault: Fault
        var remaining: Int
        var operations: Set<String>?
    }

    private struct State {
        var objects: [String: Object] = [:]
        var uploads: [String: Upload] = [:]
        var nextUploadId = 1
        var faults: [Injected] = []
        var expiredTokens: Set<String> = []
        var seenTokens: Set<String> = []
        /// S3's clock minus the test clock.
        var serverSkew: TimeInterval = 0
        var requests: [(operation: String, key: String)] = []
        /// Like Ceph Pacific: every conditional PUT answers 412, whether or not it holds.
        var refusesConditions = false
        /// Like Ceph Pacific as measured: an If-Match with the quoted ETag answers 412 even
        /// when it holds; the bare ETag is honoured.
        var refusesQuotedIfMatch = false
        var writes: [String: [WriteCondition]] = [:]
        var beforeWriting: [String: @Sendable () async -> Void] = [:]
    }

    private let state = Mutex(State())
    private let clock: any DaemonClock

    /// - Parameter clock: S3's clock (plus any `skewServerClock`); the test's clock.
    package init(clock: any DaemonClock = SystemClock()) {
        self.clock = clock
    }

    // MARK: faults

    /// The next `count` requests (of `operations`, or any) fail with `fault`.
    package func failNext(_ count: Int, with fault: Fault, operations: Set<String>? = nil) {
        state.withLock { $0.faults.append(Injected(fault: fault, remaining: count, operations: operations)) }
    }

    /// Every session token used so far is expired from now on (new grants are accepted).
    package func expireTokensSeenSoFar() {
        state.withLock { $0.expiredTokens.formUnion($0.seenTokens) }
    }

    /// Every conditional PUT is refused with 412 from now on, whether or not its condition
    /// holds, as Ceph Pacific does (`false`: conditions are honoured again).
    package func refuseConditionalWrites(_ on: Bool) {
        state.withLock { $0.refusesConditions = on }
    }

    /// From now on an If-Match with the quoted ETag is refused with 412 even when it holds,
    /// and the bare ETag is honoured, as Ceph Pacific does (measured, `Tests/e2e/test_rgw.py`).
    package func refuseQuotedIfMatch(_ on: Bool) {
        state.withLock { $0.refusesQuotedIfMatch = on }
    }

    /// `hook` runs before every PUT of `key` is answered (nil: no more): another writer
    /// gets there between a read and a write.
    package func beforeWriting(_ key: String, _ hook: (@Sendable () async -> Void)?) {
        state.withLock { $0.beforeWriting[key] = hook }
    }

    /// S3's clock runs `seconds` ahead of the test clock: requests signed more than 15
    /// minutes off are refused with RequestTimeTooSkewed and S3's time.
    package func skewServerClock(by seconds: TimeInterval) {
        state.withLock { $0.serverSkew = seconds }
    }

    // MARK: looking inside

    package func object(_ key: String) -> Object? {
        state.withLock { $0.objects[key] }
    }

    /// Every key, in order.
    package var keys: [String] {
        state.withLock { $0.objects.keys.sorted() }
    }

    /// Requests of `operation` (`PutObject`, `HeadObject`, …) that reached the bucket,
    /// failed ones included.
    package func requests(_ operation: String) -> Int {
        state.withLock { $0.requests.filter { $0.operation == operation }.count }
    }

    /// Every request that reached the bucket, in order: what a test needs to say one
    /// thing happened before another.
    package var requestLog: [(operation: String, key: String)] {
        state.withLock { $0.requests.map { (operation: $0.operation, key: $0.key) } }
    }

    /// The same, for keys under `prefix`.
    package func requests(_ operation: String, under prefix: String) -> Int {
        state.withLock { $0.requests.filter { $0.operation == operation && $0.key.utf8.starts(with: prefix.utf8) }.count }
    }

    /// The conditions of the PUTs of `key` that reached the bucket, refused ones included.
    package func writes(to key: String) -> [WriteCondition] {
        state.withLock { $0.writes[key] ?? [] }
    }

    /// Multipart uploads begun and neither completed nor aborted.
    package var openUploads: Int {
        state.withLock { $0.uploads.count }
    }

    /// Puts an object as another device would (no session, no checks).
    @discardableResult
    package func store(_ key: String, bytes: [UInt8], contentType: String = "application/octet-stream",
                       storageClass: String? = nil, metadata: [String: String] = [:], lastModified: Date? = nil) -> String {
        let etag = Hex.string(MD5.digest(bytes))
        let now = lastModified ?? clock.now()
        state.withLock {
            $0.objects[key] = Object(bytes: bytes, etag: etag, contentType: contentType, metadata: metadata,
                                     storageClass: storageClass, lastModified: now)
        }
        return etag
    }

    /// Removes an object as another device would.
    package func remove(_ key: String) {
        _ = state.withLock { $0.objects.removeValue(forKey: key) }
    }

    /// An archived object's restore is done: it can be read.
    package func finishRestore(_ key: String) {
        state.withLock { $0.objects[key]?.restore = .available }
    }

    // MARK: BucketTransport

    package func bucket(grant: BucketGrant, keyPrefix: String, clockOffset: TimeInterval,
                        trust: TLSTrust) throws(S3Error) -> any Bucket {
        View(store: self, token: grant.credentials.sessionToken ?? grant.credentials.accessKeyId, keyPrefix: keyPrefix,
             clockOffset: clockOffset)
    }

    package func shutdown() async {}

    // MARK: the operations (called by `View` once a request passed the checks)

    /// The checks every request goes through, in S3's order: the key guard (local, as the
    /// client's), then the answer: an injected fault, an expired token, a skewed clock.
    fileprivate func admit(_ operation: String, key: String, view: View, checksPrefix: Bool = true) throws(S3Error) {
        if checksPrefix {
            guard !key.isEmpty, key.utf8.starts(with: view.keyPrefix.utf8) else {
                throw S3Error(kind: .permanent, code: "InvalidRequest", message: "refusing a key outside \(view.keyPrefix)",
                              operation: operation, key: key)
            }
        }
        let serverNow = clock.now().addingTimeInterval(state.withLock { $0.serverSkew })
        let signedAt = clock.now().addingTimeInterval(view.clockOffset)
        let answer: (status: Int, code: String)? = state.withLock { s in
            s.requests.append((operation, key))
            if let i = s.faults.firstIndex(where: { $0.operations?.contains(operation) ?? true }) {
                let fault = s.faults[i].fault
                s.faults[i].remaining -= 1
                if s.faults[i].remaining <= 0 { s.faults.remove(at: i) }
                switch fault {
                case .slowDown: return (503, "SlowDown")
                case .internalError: return (500, "InternalError")
                case .connectionReset: return (0, "NetworkError")
                case .expiredToken: return (400, "ExpiredToken")
                case .accessDenied: return (403, "AccessDenied")
                }
            }
            s.seenTokens.insert(view.token)
            if s.expiredTokens.contains(view.token) { return (400, "ExpiredToken") }
            if abs(serverNow.timeIntervalSince(signedAt)) > 15 * 60 { return (403, "RequestTimeTooSkewed") }
            return nil
        }
        guard let answer else { return }
        if answer.status == 0 {
            throw S3Error(kind: .transient, code: "NetworkError", message: "connection reset by peer",
                          operation: operation, key: key)
        }
        throw Self.error(status: answer.status, code: answer.code, operation: operation, key: key,
                         serverTime: answer.code == "RequestTimeTooSkewed" ? serverNow : nil)
    }

    /// The error S3 would send: an XML body, except on a HEAD (no body at all).
    fileprivate static func error(status: Int, code: String, operation: String, key: String, serverTime: Date? = nil) -> S3Error {
        var body: [UInt8] = []
        if operation != "HeadObject" {
            var xml = "<Error><Code>\(code)</Code><Message>\(code)</Message><RequestId>in-memory</RequestId>"
            if let serverTime { xml += "<ServerTime>\(ISO8601DateFormatter().string(from: serverTime))</ServerTime>" }
            body = Array((xml + "</Error>").utf8)
        }
        var headers: [(name: String, value: String)] = [("x-amz-request-id", "in-memory")]
        if let serverTime {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
            headers.append(("Date", formatter.string(from: serverTime)))
        }
        return S3Error.decode(status: status, headers: headers, body: body, operation: operation, key: key)
    }

    fileprivate func runHook(before key: String) async {
        if let hook = state.withLock({ $0.beforeWriting[key] }) { await hook() }
    }

    fileprivate func put(key: String, bytes: [UInt8], contentMD5: String?, contentType: String, metadata: [String: String],
                         storageClass: String?, ifMatch: String?, bareIfMatch: Bool = false, ifNoneMatch: Bool) throws(S3Error) -> String {
        let operation = "PutObject"
        if let contentMD5, contentMD5 != Data(MD5.digest(bytes)).base64EncodedString() {
            throw Self.error(status: 400, code: "BadDigest", operation: operation, key: key)
        }
        let etag = Hex.string(MD5.digest(bytes))
        let now = clock.now()
        let refusal: (Int, String)? = state.withLock { s in
            let existing = s.objects[key]
            s.writes[key, default: []].append(ifMatch.map(WriteCondition.ifMatch) ?? (ifNoneMatch ? .ifNoneMatch : .none))
            if s.refusesConditions, ifMatch != nil || ifNoneMatch { return (412, "PreconditionFailed") }
            // Ceph Pacific: the quoted ETag (S3's own form) is refused even when it holds.
            if s.refusesQuotedIfMatch, ifMatch != nil, !bareIfMatch { return (412, "PreconditionFailed") }
            if ifNoneMatch, existing != nil { return (412, "PreconditionFailed") }
            if let ifMatch {
                guard let existing else { return (404, "NoSuchKey") }
                guard ETag.same(existing.etag, ifMatch) else { return (412, "PreconditionFailed") }
            }
            s.objects[key] = Object(bytes: bytes, etag: etag, contentType: contentType, metadata: metadata,
                                    storageClass: storageClass == "STANDARD" ? nil : storageClass, lastModified: now)
            return nil
        }
        if let (status, code) = refusal { throw Self.error(status: status, code: code, operation: operation, key: key) }
        return etag
    }

    fileprivate func head(key: String) -> S3Client.ObjectInfo? {
        state.withLock { s in
            s.objects[key].map {
                S3Client.ObjectInfo(size: Int64($0.bytes.count), etag: $0.etag, storageClass: $0.storageClass,
                                    restore: $0.restore, contentType: $0.contentType, originalFormat: $0.metadata["original-format"],
                                    lastModified: $0.lastModified)
            }
        }
    }

    fileprivate func read(key: String) -> Object? {
        state.withLock { $0.objects[key] }
    }

    fileprivate func list(prefix: String, after token: String?, maxKeys: Int) -> S3Client.ListPage {
        state.withLock { s in
            let limit = max(1, min(1000, maxKeys))
            let keys = s.objects.keys.filter { key in key.utf8.starts(with: prefix.utf8) && token.map { key > $0 } ?? true }.sorted()
            let page = keys.prefix(limit).map { key -> ListedObject in
                let o = s.objects[key]!
                return ListedObject(key: key, size: Int64(o.bytes.count), etag: o.etag, storageClass: o.storageClass ?? "STANDARD",
                                    lastModified: o.lastModified)
            }
            return S3Client.ListPage(objects: page, nextContinuationToken: keys.count > limit ? page.last?.key : nil)
        }
    }

    fileprivate func delete(key: String) {
        _ = state.withLock { $0.objects.removeValue(forKey: key) }
    }

    fileprivate func createUpload(key: String, contentType: String, metadata: [String: String], storageClass: String?) -> String {
        state.withLock { s in
            let id = "upload-\(s.nextUploadId)"
            s.nextUploadId += 1
            s.uploads[id] = Upload(key: key, contentType: contentType, metadata: metadata,
                                   storageClass: storageClass == "STANDARD" ? nil : storageClass)
            return id
        }
    }

    fileprivate func putPart(key: String, uploadId: String, partNumber: Int, bytes: [UInt8], contentMD5: String?) throws(S3Error) -> String {
        let operation = "UploadPart"
        let digest = MD5.digest(bytes)
        if let contentMD5, contentMD5 != Data(digest).base64EncodedString() {
            throw Self.error(status: 400, code: "BadDigest", operation: operation, key: key)
        }
        let etag = Hex.string(digest)
        let stored = state.withLock { s -> Bool in
            guard s.uploads[uploadId]?.key == key else { return false }
            s.uploads[uploadId]!.parts[partNumber] = (bytes, etag)
            return true
        }
        guard stored else { throw Self.error(status: 404, code: "NoSuchUpload", operation: operation, key: key) }
        return etag
    }

    fileprivate func parts(key: String, uploadId: String) throws(S3Error) -> [S3Client.Part] {
        let parts = state.withLock { s in
            s.uploads[uploadId].flatMap { $0.key == key ? $0.parts : nil }
        }
        guard let parts else { throw Self.error(status: 404, code: "NoSuchUpload", operation: "ListParts", key: key) }
        return parts.keys.sorted().map { S3Client.Part(partNumber: $0, etag: parts[$0]!.etag, size: Int64(parts[$0]!.bytes.count)) }
    }

    fileprivate func complete(key: String, uploadId: String, parts: [S3Client.Part]) throws(S3Error) -> String {
        let operation = "CompleteMultipartUpload"
        let now = clock.now()
        let result: Result<String, S3Error> = state.withLock { s in
            guard let upload = s.uploads[uploadId], upload.key == key else {
                return .failure(Self.error(status: 404, code: "NoSuchUpload", operation: operation, key: key))
            }
            var bytes: [UInt8] = []
            var md5s: [[UInt8]] = []
            for part in parts.sorted(by: { $0.partNumber < $1.partNumber }) {
                guard let held = upload.parts[part.partNumber], ETag.same(held.etag, part.etag) else {
                    return .failure(Self.error(status: 400, code: "InvalidPart", operation: operation, key: key))
                }
                bytes += held.bytes
                md5s.append(MD5.digest(held.bytes))
            }
            let etag = ETag.multipart(partMD5s: md5s)
            s.objects[key] = Object(bytes: bytes, etag: etag, contentType: upload.contentType, metadata: upload.metadata,
                                    storageClass: upload.storageClass, lastModified: now)
            s.uploads[uploadId] = nil
            return .success(etag)
        }
        return try result.get()
    }

    fileprivate func abort(uploadId: String) {
        _ = state.withLock { $0.uploads.removeValue(forKey: uploadId) }
    }

    fileprivate func restore(key: String) throws(S3Error) -> S3Client.RestoreRequest {
        let result: S3Client.RestoreRequest? = state.withLock { s in
            guard let object = s.objects[key] else { return nil }
            guard let storageClass = object.storageClass, ["GLACIER", "DEEP_ARCHIVE"].contains(storageClass) else { return .available }
            switch object.restore {
            case nil:
                s.objects[key]!.restore = .inProgress
                return .started
            case .inProgress?: return .inProgress
            case .available?: return .available
            }
        }
        guard let result else { throw Self.error(status: 404, code: "NoSuchKey", operation: "RestoreObject", key: key) }
        return result
    }
}

/// One session's attempt at the in-memory bucket: its token, prefix and clock offset.
private struct View: Bucket {
    let store: InMemoryBucket
    let token: String
    let keyPrefix: String
    let clockOffset: TimeInterval

    /// As over TLS: bodies are not signed (Content-MD5 guards them).
    var signsPayload: Bool { false }

    func putObject(key: String, path: String, offset: Int64, length: Int64?, contentMD5: String, contentType: String,
                   metadata: [String: String], storageClass: String?, payloadSHA256: String?, expected: FileIdentity?,
                   followSymlinks: Bool, ifNoneMatch: Bool) async throws(S3Error) -> String {
        let bytes = try Self.read(path, offset: offset, length: length, expected: expected, followSymlinks: followSymlinks,
                                  operation: "PutObject", key: key)
        try store.admit("PutObject", key: key, view: self)
        return try store.put(key: key, bytes: bytes, contentMD5: contentMD5, contentType: contentType, metadata: metadata,
                             storageClass: storageClass, ifMatch: nil, ifNoneMatch: ifNoneMatch)
    }

    func putObject(key: String, bytes: [UInt8], contentType: String, metadata: [String: String], ifMatch: String?,
                   bareIfMatch: Bool, ifNoneMatch: Bool) async throws(S3Error) -> String {
        await store.runHook(before: key)
        try store.admit("PutObject", key: key, view: self)
        return try store.put(key: key, bytes: bytes, contentMD5: nil, contentType: contentType, metadata: metadata,
                             storageClass: nil, ifMatch: ifMatch, bareIfMatch: bareIfMatch, ifNoneMatch: ifNoneMatch)
    }

    func headObject(key: String) async throws(S3Error) -> S3Client.ObjectInfo? {
        try store.admit("HeadObject", key: key, view: self)
        return store.head(key: key)
    }

    func getObjectIfPresent(key: String) async throws(S3Error) -> (bytes: [UInt8], etag: String)? {
        try store.admit("GetObject", key: key, view: self)
        return store.read(key: key).map { ($0.bytes, $0.etag) }
    }

    func getObject(key: String, range: ClosedRange<Int64>?, expectedBytes: Int64,
                   onHead: (@Sendable (S3Client.ObjectHead) async throws -> Void)?,
                   consume: @Sendable (ByteBuffer) async throws -> Void) async throws(S3Error) -> S3Client.ObjectHead {
        let operation = "GetObject"
        try store.admit(operation, key: key, view: self)
        guard let object = store.read(key: key) else {
            throw InMemoryBucket.error(status: 404, code: "NoSuchKey", operation: operation, key: key)
        }
        // As S3: an archived object is read only once a copy is back.
        if let c = object.storageClass, ["GLACIER", "DEEP_ARCHIVE"].contains(c), object.restore != .available {
            throw InMemoryBucket.error(status: 403, code: "InvalidObjectState", operation: operation, key: key)
        }
        let size = Int64(object.bytes.count)
        var slice = object.bytes[...]
        if let range {
            guard range.lowerBound < size else {
                throw InMemoryBucket.error(status: 416, code: "InvalidRange", operation: operation, key: key)
            }
            slice = object.bytes[Int(range.lowerBound)...Int(min(range.upperBound, size - 1))]
        }
        let head = S3Client.ObjectHead(etag: object.etag, contentLength: Int64(slice.count), objectSize: size, contentType: object.contentType,
                                       originalFormat: object.metadata["original-format"])
        do {
            try await onHead?(head)
            var start = slice.startIndex
            while start < slice.endIndex {
                let end = min(start + 64 * 1024, slice.endIndex)
                try await consume(ByteBuffer(bytes: slice[start..<end]))
                start = end
            }
        } catch {
            throw S3Error(kind: .localFile, code: "ConsumerFailed", message: "\(error)", operation: operation, key: key)
        }
        return head
    }

    func listObjects(prefix: String, continuationToken: String?, maxKeys: Int) async throws(S3Error) -> S3Client.ListPage {
        guard prefix.utf8.starts(with: keyPrefix.utf8) else {
            throw S3Error(kind: .permanent, code: "InvalidRequest", message: "refusing to list outside \(keyPrefix)",
                          operation: "ListObjectsV2", key: prefix)
        }
        try store.admit("ListObjectsV2", key: prefix, view: self, checksPrefix: false)
        return store.list(prefix: prefix, after: continuationToken, maxKeys: maxKeys)
    }

    func deleteObject(key: String) async throws(S3Error) {
        try store.admit("DeleteObject", key: key, view: self)
        store.delete(key: key)
    }

    func createMultipartUpload(key: String, contentType: String, metadata: [String: String],
                               storageClass: String?) async throws(S3Error) -> String {
        try store.admit("CreateMultipartUpload", key: key, view: self)
        return store.createUpload(key: key, contentType: contentType, metadata: metadata, storageClass: storageClass)
    }

    func uploadPart(key: String, uploadId: String, partNumber: Int, path: String, offset: Int64, length: Int64,
                    contentMD5: String?, payloadSHA256: String?, expected: FileIdentity?,
                    followSymlinks: Bool) async throws(S3Error) -> String {
        let bytes = try Self.read(path, offset: offset, length: length, expected: expected, followSymlinks: followSymlinks,
                                  operation: "UploadPart", key: key)
        try store.admit("UploadPart", key: key, view: self)
        return try store.putPart(key: key, uploadId: uploadId, partNumber: partNumber, bytes: bytes, contentMD5: contentMD5)
    }

    func listParts(key: String, uploadId: String) async throws(S3Error) -> [S3Client.Part] {
        try store.admit("ListParts", key: key, view: self)
        return try store.parts(key: key, uploadId: uploadId)
    }

    func completeMultipartUpload(key: String, uploadId: String, parts: [S3Client.Part]) async throws(S3Error) -> String {
        try store.admit("CompleteMultipartUpload", key: key, view: self)
        return try store.complete(key: key, uploadId: uploadId, parts: parts)
    }

    func abortMultipartUpload(key: String, uploadId: String) async throws(S3Error) {
        try store.admit("AbortMultipartUpload", key: key, view: self)
        store.abort(uploadId: uploadId)
    }

    func restoreObject(key: String, days: Int, tier: String) async throws(S3Error) -> S3Client.RestoreRequest {
        try store.admit("RestoreObject", key: key, view: self)
        return try store.restore(key: key)
    }

    /// The body of a file request, read as the real client reads it (the hashed file only).
    private static func read(_ path: String, offset: Int64, length: Int64?, expected: FileIdentity?, followSymlinks: Bool,
                             operation: String, key: String) throws(S3Error) -> [UInt8] {
        let (file, length) = try S3Client.openBody(path: path, offset: offset, length: length, expected: expected,
                                                   followSymlinks: followSymlinks, operation: operation, key: key)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(length))
        do {
            try file.read(from: offset, length: length) { bytes += $0 }
        } catch {
            let why = error == .changed ? "\(path) shrank while it was read" : "\(path): \(error)"
            throw S3Error(kind: .localFile, code: "LocalFileError", message: why, operation: operation, key: key)
        }
        return bytes
    }
}
