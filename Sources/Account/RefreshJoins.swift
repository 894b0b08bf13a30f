import Foundation

/// One access-token refresh at a time. The STS fetch and the Apple check can both meet an
/// expired access token at once, and the backend rotates refresh tokens, so a second
/// refresh sent with the same (by then dead) refresh token would be answered
/// `invalid_grant` and sign the NAS out although the first one succeeded. Every caller
/// that asks while a refresh runs joins that one and gets its result (`Next`: what it
/// does then).
struct RefreshJoins<Next: Sendable>: Sendable {
    private var running: UUID?
    private var joined: [UUID: [Next]] = [:]

    /// `next` joins the refresh under way (nil); or, when none runs and `canStart`, a new
    /// refresh starts with it (its id).
    mutating func join(_ next: Next, canStart: Bool) -> UUID? {
        if let running {
            joined[running, default: []].append(next)
            return nil
        }
        guard canStart else { return nil }
        let id = UUID()
        running = id
        joined[id] = [next]
        return id
    }

    /// The refresh `id` ended: what its callers do now.
    mutating func finish(_ id: UUID) -> [Next] {
        if running == id { running = nil }
        return joined.removeValue(forKey: id) ?? []
    }

    /// A new sign-in (or none): the refresh under way no longer serves new callers, but
    /// still answers those that joined it.
    mutating func detach() {
        running = nil
    }
}
