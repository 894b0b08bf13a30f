import Synchronization

/// What a relay has sent, shared with the S3 client's callbacks; and the size that made
/// it refuse the object, if one did.
final class Relayed: Sendable {
    private let state = Mutex<(begun: Bool, total: Int64, sent: Int64, refused: Int64?)>((false, 0, 0, nil))
    var begun: Bool { state.withLock { $0.begun } }
    var sent: Int64 { state.withLock { $0.sent } }
    var total: Int64 { state.withLock { $0.total } }
    var refused: Int64? { state.withLock { $0.refused } }
    func begin(_ total: Int64) { state.withLock { $0 = (true, total, $0.sent, nil) } }
    func add(_ n: Int) { state.withLock { $0.sent += Int64(n) } }
    func refuse(_ size: Int64) { state.withLock { $0.refused = size } }
}

/// Thrown from a GET's head: the object is not the size asked for.
struct SizeRefusal: Error {}
