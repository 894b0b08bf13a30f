import Dispatch

/// Runs the merge's file and SQLite work on a utility queue, off Swift's small
/// cooperative pool (a million-row merge takes seconds of blocking I/O).
enum Blocking {
    static let queue = DispatchQueue(label: "photolala.catalog.io", qos: .utility)

    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        let result: Result<T, any Error> = await withCheckedContinuation { c in
            queue.async { c.resume(returning: Result { try work() }) }
        }
        return try result.get()
    }
}
