/// What a stage asks before it takes work: may it run now? The daemon answers from the
/// user's pause and the account's state, so a stage imports neither; `changes()` wakes a
/// stage that waits.
package protocol StageGate: Sendable {
    /// nil when the stage may run; otherwise why not, in a few words.
    func blockReason() async -> String?
    /// Yields when `blockReason()` may answer differently.
    func changes() -> AsyncStream<Void>
}
