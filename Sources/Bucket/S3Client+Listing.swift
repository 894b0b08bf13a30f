import Foundation
import PhotolalaCore

/// Listing a prefix (`ListObjectsV2`), a page of at most 1,000 keys at a time: how the
/// daemon learns what the bucket already holds without asking one key at a time.
extension S3Client {
    /// One key of a page (shared with the inventory, which records it as it is).
    package typealias ListedObject = PhotolalaCore.ListedObject

    package struct ListPage: Sendable, Equatable {
        package var objects: [ListedObject]
        /// Where the next page starts; nil on the last page.
        package var nextContinuationToken: String?

        package init(objects: [ListedObject], nextContinuationToken: String?) {
            self.objects = objects
            self.nextContinuationToken = nextContinuationToken
        }
    }

    /// One page of the keys under `prefix`, in key order. `prefix` must lie inside the
    /// client's `requiredKeyPrefix` (the session policy allows listing only there).
    package func listObjects(prefix: String, continuationToken: String? = nil, maxKeys: Int = 1000,
                            credentials: S3Credentials) async throws(S3Error) -> ListPage {
        let operation = "ListObjectsV2"
        if let required = configuration.requiredKeyPrefix, !prefix.utf8.starts(with: required.utf8) {
            throw S3Error(kind: .permanent, code: "InvalidRequest", message: "refusing to list outside \(required)",
                          operation: operation, key: prefix)
        }
        var query: [SigV4Signer.QueryItem] = [.init("list-type", "2"), .init("prefix", prefix),
                                              .init("max-keys", String(max(1, min(1000, maxKeys))))]
        if let continuationToken { query.append(.init("continuation-token", continuationToken)) }
        let response = try await execute(Request(operation: operation, method: .GET, path: target.pathPrefix + "/",
                                                 query: query, key: prefix), credentials: credentials)
        guard response.status == 200 else { throw response.error(operation: operation, key: prefix) }
        guard let root = S3XMLElement.parse(response.body), root.name != "Error" else {
            if S3XMLElement.parse(response.body)?.name == "Error" { throw response.error(operation: operation, key: prefix) }
            throw malformed(response, operation: operation, key: prefix, expected: "ListBucketResult")
        }
        var objects: [ListedObject] = []
        for element in root.children("Contents") {
            guard let key = element.childText("Key"), let size = element.childText("Size").flatMap({ Int64($0) }) else {
                throw malformed(response, operation: operation, key: prefix, expected: "Contents with Key and Size")
            }
            objects.append(ListedObject(key: key, size: size, etag: Self.unquoted(element.childText("ETag") ?? ""),
                                        storageClass: element.childText("StorageClass").flatMap { $0.isEmpty ? nil : $0 } ?? "STANDARD",
                                        lastModified: element.childText("LastModified").flatMap(S3Error.parseISO8601)))
        }
        let truncated = root.childText("IsTruncated")?.lowercased() == "true"
        let token = root.childText("NextContinuationToken").flatMap { $0.isEmpty ? nil : $0 }
        if truncated && token == nil {
            throw malformed(response, operation: operation, key: prefix, expected: "a NextContinuationToken on a truncated page")
        }
        return ListPage(objects: objects, nextContinuationToken: truncated ? token : nil)
    }
}
