import Foundation
import PhotolalaCore

/// One channel's deliveries waiting, in order, and how its last attempts went. A failed
/// delivery is tried again with the daemon's `Backoff` (2 s doubling to 30 min) until a
/// day has passed since it was queued, then dropped with its error kept for status.
/// A coalescing outbox (the dead man's switch) keeps only the newest: its receiver cares
/// about the state now, not about the ones it missed.
///
/// A pure value: the time and the random draw come in.
package struct Outbox<Payload: Sendable & Equatable>: Sendable, Equatable {
    package struct Delivery: Sendable, Equatable {
        package var payload: Payload
        package var queuedAt: Date
        package var attempts = 0
        package var notBefore: Date
        /// A periodic ping is sent once: the next one is due soon anyway.
        package var retries: Bool
    }

    package enum Next: Sendable, Equatable {
        case send(Payload)
        case wait(until: Date)
        case idle
    }

    package var backoff = Backoff(base: 2, cap: 1800, jitter: .equal)
    package var giveUpAfter: TimeInterval = 86400
    /// At most this many wait; the oldest is dropped to make room (a receiver down for a
    /// day while a problem repeats every second must not grow memory without bound).
    package var capacity = 100
    package let coalescing: Bool

    package private(set) var queue: [Delivery] = []
    package private(set) var lastSentAt: Date?
    package private(set) var lastError: String?
    package private(set) var sent = 0
    package private(set) var dropped = 0

    package init(coalescing: Bool = false) {
        self.coalescing = coalescing
    }

    package mutating func add(_ payload: Payload, now: Date, retries: Bool = true) {
        if coalescing { queue.removeAll() }
        if queue.count >= capacity {
            queue.removeFirst()
            dropped += 1
        }
        queue.append(Delivery(payload: payload, queuedAt: now, notBefore: now, retries: retries))
    }

    /// The delivery to attempt now, or until when to wait.
    package func next(now: Date) -> Next {
        guard let head = queue.first else { return .idle }
        return head.notBefore <= now ? .send(head.payload) : .wait(until: head.notBefore)
    }

    /// `payload` was delivered (it is the head, unless a newer one replaced it meanwhile).
    package mutating func succeeded(_ payload: Payload, now: Date) {
        lastSentAt = now
        lastError = nil
        sent += 1
        if queue.first?.payload == payload { queue.removeFirst() }
    }

    /// The head failed with `why`; returns true when it was dropped (no retry, or a day passed).
    @discardableResult
    package mutating func failed(_ payload: Payload, _ why: String, now: Date, random: Double) -> Bool {
        lastError = why
        guard var head = queue.first, head.payload == payload else { return false }
        head.attempts += 1
        let wait = backoff.delay(after: head.attempts, random: random)
        if !head.retries || now.addingTimeInterval(wait).timeIntervalSince(head.queuedAt) > giveUpAfter {
            queue.removeFirst()
            dropped += 1
            return true
        }
        head.notBefore = now.addingTimeInterval(wait)
        queue[0] = head
        return false
    }

    /// A reload removed the channel: nothing more to send on it.
    package mutating func clear() {
        queue.removeAll()
    }

    package var pending: Int { queue.count }
}
