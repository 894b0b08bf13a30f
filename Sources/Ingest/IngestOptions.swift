import Digests
import Foundation
import PhotolalaCore
import Watcher

extension IngestService {
    package struct Options: Sendable, Equatable {
        package var watcher: WatcherOptions
        package var rescanInterval: Duration?
        package var hashWorkers: Int

        /// The one mapping from settings, at start and on reload.
        package init(_ settings: Settings, hashWorkers: Int = ProcessInfo.processInfo.activeProcessorCount) {
            let watch = settings.watch
            watcher = WatcherOptions(folders: watch.folders, extensions: Set(watch.extensions), exclude: watch.exclude,
                                     followSymlinks: watch.followSymlinks, settle: watch.settle)
            rescanInterval = watch.rescanInterval
            self.hashWorkers = max(1, hashWorkers)
        }

        package var settleRule: SettleRule { SettleRule(settle: watcher.settle) }
    }
}
