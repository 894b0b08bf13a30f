import Bucket
import Foundation
import Queue

/// What a complete listing says about one object the daemon holds as backed up, as a pure
/// value: the end of every listing asks it about sizes (an object gone or cut short is
/// sent again), `verify` about ETags too (s3-layout.md: a single PUT's ETag is its MD5,
/// a multipart upload's the MD5 of its parts' MD5s and `-N`).
package enum ObjectCheck {
    package enum Verdict: Sendable, Equatable {
        /// Listed with its size (and, when asked, an ETag that proves its bytes).
        case ok
        /// Listed with its size, but the ETag proves nothing: a multipart upload by another
        /// tool (its part size is unknown), or a bucket with SSE-KMS. Only reading it back can.
        case unproven
        /// Not in the bucket.
        case missing
        case wrongSize
        /// Listed with its size but an ETag that is not the one its bytes give.
        case wrongETag
        /// Sent (or found) after the listing began: the listing need not show it yet.
        case tooRecent
    }

    /// - Parameters:
    ///   - listingStartedAt: when the complete listing the inventory now holds began.
    ///   - checkETags: `verify`; a periodic listing only checks presence and size.
    ///   - sseKms: the bucket encrypts with SSE-KMS, so no ETag is an MD5.
    package static func verdict(_ object: UploadedObject, listingStartedAt: Date, checkETags: Bool, sseKms: Bool) -> Verdict {
        guard (object.uploadedAt ?? .distantPast) < listingStartedAt else { return .tooRecent }
        guard let listed = object.listed else { return .missing }
        guard listed.size == object.size else { return .wrongSize }
        guard checkETags else { return .ok }
        if sseKms { return .unproven }
        // A single PUT's ETag that is the key's MD5 proves the bytes, whoever sent them.
        if ETag.isPlainMD5(listed.etag) && ETag.same(listed.etag, object.md5) { return .ok }
        if let expected = object.expectedETag { return ETag.same(listed.etag, expected) ? .ok : .wrongETag }
        // Found there, sent by someone else: a plain MD5 must be the key's; a multipart
        // ETag depends on a part size only that tool knew.
        return ETag.isPlainMD5(listed.etag) ? .wrongETag : .unproven
    }
}
