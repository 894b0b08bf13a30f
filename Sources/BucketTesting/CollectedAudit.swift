import PhotolalaCore
import Synchronization

/// An audit recorder for tests: keeps every event it is given, in order, so a test can
/// say which a part reported and with what (the trail's own writing is `AuditTrailTests`).
package final class CollectedAudit: AuditRecorder {
    private let events = Mutex<[AuditEvent]>([])

    package init() {}

    package func record(_ event: AuditEvent) {
        events.withLock { $0.append(event) }
    }

    /// Every event so far, oldest first.
    package var all: [AuditEvent] { events.withLock { $0 } }

    /// The events of one kind, oldest first.
    package func of(_ kind: AuditEvent.Kind) -> [AuditEvent] {
        all.filter { $0.kind == kind }
    }
}
