import PhotolalaCore

/// A configured folder: its tree while it can be read, the retry schedule while it cannot.
final class RootFolder {
    let path: String
    var node: DirNode?
    var identity: DeviceInode?
    var reportedMissing = false
    var retryAt: ContinuousClock.Instant?
    /// Counts the failed attempts since the folder was last attached.
    var retry: Backoff

    init(path: String, retry: Backoff) {
        self.path = path
        self.retry = retry
    }
}
