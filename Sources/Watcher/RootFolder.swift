/// A configured folder: its tree while it can be read, the retry schedule while it cannot.
final class RootFolder {
    let path: String
    var node: DirNode?
    var identity: DeviceInode?
    var reportedMissing = false
    var retryAt: ContinuousClock.Instant?
    var retryDelay: Duration

    init(path: String, retryDelay: Duration) {
        self.path = path
        self.retryDelay = retryDelay
    }
}
