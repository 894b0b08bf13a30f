import Account
import PhotolalaCore
import Vault

/// The account key this NAS keeps in `state_dir/account-key`, for the manifest and restore
/// until the key service (issue 23, branch q-keys) takes its place: ready when a confirmed
/// key of the signed-in account is kept there, needed otherwise.
struct LocalAccountKey: MetadataKeySource {
    let store: AccountKeyStore
    let account: AccountService

    var keyChanges: ChangeFeed { account.statusChanges }

    func metadataKeyState() async -> MetadataKeyState {
        guard let user = await account.userId else { return .none }
        guard let state = try? store.load(), state.userId == user, state.pending == nil else { return .needed }
        return .ready(state.accountKey)
    }
}
