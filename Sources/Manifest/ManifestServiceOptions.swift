import Bucket
import Foundation
import PhotolalaCore

extension ManifestService {
    package struct Options: Sendable, Equatable {
        package var folders: [String]
        package var deviceName: String
        package var policy: ManifestPolicy
        package var trust: TLSTrust
        /// How often this NAS's own manifest in the bucket is looked at for a downgrade or an
        /// older record put back (`PHOTOLALAD_MANIFEST_CHECK_INTERVAL`, seconds, for tests).
        package var ownCheckInterval: TimeInterval = 3600

        /// The one mapping from settings, at start and on reload.
        package init(_ settings: Settings, environment: [String: String] = ProcessInfo.processInfo.environment) {
            folders = settings.watch.folders
            deviceName = settings.account.deviceName ?? HostName.current()
            policy = ManifestPolicy()
            trust = TLSTrust(caFile: settings.tls.caFile)
            // A tuning knob for tests and for people measuring compaction: compact after
            // this many log segments (docs/manifest.md).
            if let n = environment["PHOTOLALAD_MANIFEST_COMPACT_SEGMENTS"].flatMap(Int.init), n > 0 {
                policy.maxLogSegments = n
            }
            if let n = environment["PHOTOLALAD_MANIFEST_CHECK_INTERVAL"].flatMap(Double.init), n > 0 {
                ownCheckInterval = n
            }
        }
    }
}
