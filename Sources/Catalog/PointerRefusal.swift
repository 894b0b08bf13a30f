/// What a `412 Precondition Failed` on the pointer means, judged from the pointer read
/// again right after. Normally someone published in between, and the merge starts over
/// from their catalog. But some stores refuse conditions that hold (Ceph Pacific answers
/// 412 to a quoted `If-Match`): then the pointer has not changed, and starting over would
/// loop forever. Such a store gets the fallback app-catalog.md allows: write the pointer
/// and read it back.
package enum PointerRefusal: Sendable, Equatable {
    /// Someone published in between: start over from their catalog.
    case raced
    /// The condition held and the store refused anyway: it cannot write conditionally.
    case storeIgnoresConditions

    package static func judge(sent: PointerCondition, now: StoredPointer?) -> PointerRefusal {
        switch sent {
        case .ifMatch(let etag):
            // The same ETag is the same pointer: a store that honours If-Match would have
            // written (an equal body has an equal ETag, so even a rewrite with the same
            // value would have matched).
            return now?.etag == etag ? .storeIgnoresConditions : .raced
        case .ifNoneMatch:
            return now == nil ? .storeIgnoresConditions : .raced
        case .unconditional:
            return .raced
        }
    }
}
