import Bucket
import PhotolalaCore

extension RestoreService {
    package struct Options: Sendable, Equatable {
        /// `upload.bandwidth_limit`, applied to what restores read as well.
        package var bandwidthLimit: Int64?
        /// Objects larger than this are read as ranges of `rangeSize`, `parallelRanges` at a time.
        package var rangeThreshold: Int64 = 16 << 20
        package var rangeSize: Int64 = 8 << 20
        package var parallelRanges = 3
        /// Ranges held in memory at once, over every restore (bounds the daemon's memory).
        package var bufferBudget: Int64 = 24 << 20
        /// HEADs in flight when asking where objects stand.
        package var headConcurrency = 16
        /// Days a copy brought back from an archive class stays readable.
        package var thawDays = 7
        /// The system CA store plus `tls.ca_file`, as for every other connection.
        package var trust: TLSTrust
        /// Transient failures tried again in place: 4, after 0.25 s to 1, 2, 4 and 8 s.
        package var budget = BucketBudget(transientRetries: 4, backoff: Backoff(base: 1, cap: 75, jitter: .full, floor: 0.25),
                                          repeatsUnreadableAnswers: true)
        /// Where `restore --by-date` keeps its copy of the apps' catalog (`state_dir`).
        package var scratchDirectory: String

        package init(_ settings: Settings) {
            bandwidthLimit = settings.upload.bandwidthLimit
            trust = TLSTrust(caFile: settings.tls.caFile)
            scratchDirectory = settings.daemon.stateDir
        }
    }
}
