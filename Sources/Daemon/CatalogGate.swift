import Account
import Catalog

/// The catalog writes to the bucket only when uploads may run (signed in, Apple ID
/// authorized, no subscription or quota pause, not paused by the user), with the
/// account's credentials and user id.
struct CatalogGate: CatalogAccess {
    let core: DaemonCore
    let account: AccountService

    func session() async -> CatalogSession? {
        if await core.isUserPaused { return nil }
        guard let grant = try? await account.credentials(), let userId = await account.userId else { return nil }
        return CatalogSession(grant: grant, userId: userId)
    }

    func rejected(_ grant: STSGrant) async {
        await account.rejectedByS3(grant)
    }

    func changes() -> AsyncStream<Void> {
        core.changes()
    }
}
