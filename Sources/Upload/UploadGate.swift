/// What the uploaders ask before taking work: may uploads run now? The daemon answers
/// from the user's pause and the account's state; `changes()` wakes waiting workers.
package protocol UploadGate: Sendable {
    /// nil when uploads may run; otherwise why not, in a few words.
    func blockReason() async -> String?
    func changes() -> AsyncStream<Void>
}
