import PhotolalaCore
import Synchronization
import Vault

/// A metadata key source for tests: a fixed state (`ready` with a key, `needed`…) that a
/// test changes, each change fed to the stages as the key service's would be.
package final class FixedKeys: MetadataKeySource {
    package let keyChanges = ChangeFeed()
    private let state: Mutex<MetadataKeyState>

    package init(_ state: MetadataKeyState = .ready(AccountKey.generate())) {
        self.state = Mutex(state)
    }

    package func metadataKeyState() async -> MetadataKeyState { state.withLock { $0 } }

    /// The key, when ready.
    package var accountKey: AccountKey? {
        if case .ready(let key) = state.withLock({ $0 }) { return key }
        return nil
    }

    package func set(_ new: MetadataKeyState) {
        state.withLock { $0 = new }
        keyChanges.changed()
    }
}
