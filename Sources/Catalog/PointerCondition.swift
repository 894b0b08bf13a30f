/// How the pointer is replaced (app-catalog.md step 4).
package enum PointerCondition: Sendable, Equatable {
    /// Only if it still has this ETag (it was read with it).
    case ifMatch(String)
    /// Only if there is none yet.
    case ifNoneMatch
    /// Whatever is there: only for a store that mishandles conditions, and then read back.
    case unconditional
}
