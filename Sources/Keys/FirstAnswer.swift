import Foundation
import PhotolalaCore

extension KeyService {
    /// The first answer `ask` gives after a change of `changes`; nil when `deadline` comes first.
    static func firstAnswer<T: Sendable>(after changes: AsyncStream<Void>, by deadline: Date, clock: any DaemonClock,
                                         _ ask: @escaping @Sendable () async -> T?) async -> T? {
        await withTaskGroup(of: T?.self) { group in
            group.addTask {
                for await _ in changes {
                    if let answer = await ask() { return answer }
                }
                return nil
            }
            group.addTask {
                try? await clock.sleep(until: deadline)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}
