import Foundation

/// The account's one timer, aimed at the earlier of the STS machine's and the Apple
/// check's wakes, so nothing polls. A pure value: the account service sets what a
/// machine's `.wake(at:)` asks for, hands each due wake back to its machine once, and
/// sleeps until `next`.
package struct AccountWakes: Sendable, Equatable {
    enum Machine: Sendable { case credentials, apple }

    private var credentials: Date?
    private var apple: Date?

    /// `machine` asked to be woken at `at`, in place of what it asked before.
    mutating func set(_ machine: Machine, at: Date?) {
        switch machine {
        case .credentials: credentials = at
        case .apple: apple = at
        }
    }

    /// Whether `machine`'s wake is due at `now`. A due wake is taken out: the machine's
    /// answer to it asks for the next one.
    mutating func take(_ machine: Machine, at now: Date) -> Bool {
        switch machine {
        case .credentials:
            guard let at = credentials, at <= now else { return false }
            credentials = nil
        case .apple:
            guard let at = apple, at <= now else { return false }
            apple = nil
        }
        return true
    }

    /// When the timer fires next; nil: nothing is scheduled.
    var next: Date? { [credentials, apple].compactMap { $0 }.min() }
}
