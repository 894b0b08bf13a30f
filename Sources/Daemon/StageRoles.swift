import Audit
import Bucket
import Catalog
import Control
import Account
import Ingest
import Inventory
import Keys
import Manifest
import ManifestFormat
import Mirror
import Notify
import RestoreRelay
import PhotolalaCore
import Thumbnails
import ServiceLifecycle
import Upload

/// One entry of the daemon's list of parts (`Daemon.run`): its name, the service the
/// group runs when it is one, and the roles it plays, read from what it conforms to — so
/// a part's status, reload and attention facts cannot be forgotten in a second list.
package struct DaemonPart: Sendable {
    let name: String
    let service: (any Service)?
    let status: (any StatusContributor)?
    let reload: (any Reconfigurable)?
    let witness: (any AttentionWitness)?

    package init(_ name: String, _ part: any Sendable) {
        self.name = name
        service = part as? any Service
        status = part as? any StatusContributor
        reload = part as? any Reconfigurable
        witness = part as? any AttentionWitness
    }
}

/// A part of the daemon that shows something in the status. Each fills in its own fields
/// only, so the order they are asked in does not matter.
package protocol StatusContributor: Sendable {
    func contribute(to status: inout DaemonStatus) async
}

/// A part that knows a fact the attention rules need and the status does not show.
package protocol AttentionWitness: Sendable {
    func note(_ facts: inout AttentionRules.Facts) async
}

/// A part of the daemon that takes new settings on reload, through the same mapping from
/// `Settings` it was started with.
package protocol Reconfigurable: Sendable {
    func apply(_ settings: Settings) async
}

extension IngestService: StatusContributor, Reconfigurable {
    package func apply(_ settings: Settings) async { apply(Options(settings)) }
}

extension UploaderService: StatusContributor, Reconfigurable {
    package func apply(_ settings: Settings) async { await apply(Options(settings)) }
}

extension AccountService: StatusContributor, Reconfigurable, AttentionWitness {
    package func apply(_ settings: Settings) async { reconfigure(AccountService.Options(settings)) }

    /// A device id is made at the first sign-in and kept: "not signed in" on a NAS that
    /// has one means backups that ran have stopped, not a fresh install.
    package func note(_ facts: inout AttentionRules.Facts) async { facts.signedInBefore = signedInBefore }
}

extension KeyService: StatusContributor, Reconfigurable {
    package func apply(_ settings: Settings) async { await apply(trust: TLSTrust(caFile: settings.tls.caFile)) }
}

extension NotifyService: StatusContributor, Reconfigurable {
    package func apply(_ settings: Settings) async { await apply(Options(settings)) }
}

extension BandwidthSchedule: StatusContributor, Reconfigurable {}

extension AuditTrail: Reconfigurable {
    package func apply(_ settings: Settings) async { setMaxSize(settings.audit.maxSize) }
}

extension MetricsListenerService: StatusContributor, Reconfigurable {
    package func contribute(to status: inout DaemonStatus) async {
        if let problem { status.problems.append(problem) }
    }

    package func apply(_ settings: Settings) async { await apply(settings.metrics.listen) }
}

extension ThumbnailService: StatusContributor, Reconfigurable {
    package func apply(_ settings: Settings) async { await apply(Options(settings)) }
}

extension InventoryService: StatusContributor, Reconfigurable {
    package func apply(_ settings: Settings) async { await apply(Options(settings)) }
}

extension ManifestService: StatusContributor, Reconfigurable {
    package func apply(_ settings: Settings) async { await apply(Options(settings)) }
}

extension RestoreService: StatusContributor, Reconfigurable {
    package func apply(_ settings: Settings) async { await apply(Options(settings)) }
}

extension CatalogService: StatusContributor, Reconfigurable {
    package func apply(_ settings: Settings) async { await apply(Options(settings)) }
}

extension ManifestAlarms: StatusContributor {}
extension MirrorService: StatusContributor, Reconfigurable {
    package func apply(_ settings: Settings) async { await apply(Options(settings)) }
}
