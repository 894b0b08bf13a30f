import Foundation
import Logging
import PhotolalaCore
import ServiceLifecycle

/// Puts `upload.bandwidth_limit` in force: a single rate at once, a timetable slot by slot
/// (config.md "Bandwidth timetable"). A timer wakes at the end of each slot (and at least
/// every minute, so a changed clock or a suspend is caught up), a reload at once; the new
/// rate goes out on `feed`, which the uploader follows (a `0` slot holds its uploads), and
/// status says `pauseReason` `schedule` until the slot ends.
package actor BandwidthSchedule: Service {
    /// What spends upload bandwidth reads the rate here.
    nonisolated let feed: BandwidthFeed
    private var timetable: BandwidthTimetable?
    private var fixedRate: Int64?
    private let statusChanges: ChangeFeed
    private let logger: Logger
    private let timeZone: @Sendable () -> TimeZone
    private let signal = ChangeFeed()

    init(settings: Settings, feed: BandwidthFeed, statusChanges: ChangeFeed, logger: Logger,
         timeZone: @escaping @Sendable () -> TimeZone = { TimeZone.current }) {
        timetable = settings.upload.bandwidthTimetable
        fixedRate = settings.upload.bandwidthLimit
        self.feed = feed
        self.statusChanges = statusChanges
        self.logger = logger
        self.timeZone = timeZone
        feed.publish(Self.current(timetable: timetable, fixedRate: fixedRate, now: Date(), timeZone: timeZone()))
    }

    package func apply(_ settings: Settings) async {
        timetable = settings.upload.bandwidthTimetable
        fixedRate = settings.upload.bandwidthLimit
        publish(now: Date(), force: true)
        signal.changed()
    }

    package func run() async throws {
        publish(now: Date(), force: true)
        await cancelWhenGracefulShutdown { await self.loop() }
    }

    private func loop() async {
        while !Task.isCancelled {
            let since = signal.generation
            let minute = Date().addingTimeInterval(60)
            await signal.wait(since: since, until: feed.current.until.map { min($0, minute) } ?? minute)
            guard !Task.isCancelled else { return }
            publish(now: Date(), force: false)
        }
    }

    private func publish(now: Date, force: Bool) {
        let before = feed.current
        let new = Self.current(timetable: timetable, fixedRate: fixedRate, now: now, timeZone: timeZone())
        feed.publish(new)
        let changed = new.rate != before.rate || new.scheduled != before.scheduled
        if changed && new.scheduled {
            let until = new.until.map { Self.localTime($0, timeZone()) } ?? "?"
            logger.notice(new.isPaused ? "the bandwidth timetable pauses uploads until \(until)"
                          : "the bandwidth timetable allows \(new.rate) until \(until)")
        }
        if changed || force || new != before { statusChanges.changed() }
    }

    package static func current(timetable: BandwidthTimetable?, fixedRate: Int64?, now: Date, timeZone: TimeZone) -> BandwidthFeed.Current {
        guard let timetable else { return BandwidthFeed.Current(rate: fixedRate.map { .limit($0) } ?? .unlimited) }
        let slot = timetable.slot(at: now, in: timeZone)
        return BandwidthFeed.Current(rate: slot.rate, until: slot.endsAt, scheduled: true)
    }

    static func localTime(_ date: Date, _ timeZone: TimeZone) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let c = calendar.dateComponents([.hour, .minute], from: date)
        return String(format: "%02d:%02d", c.hour ?? 0, c.minute ?? 0)
    }

    /// The `bandwidth` block of status (the pause itself is set where the parts meet, in
    /// `DaemonCore.finish`).
    package func contribute(to s: inout DaemonStatus) {
        let current = feed.current
        s.bandwidth = DaemonStatus.Bandwidth(limit: current.rate.bytesPerSecond, timetable: timetable?.description,
                                             until: current.until.map(Timestamp.string),
                                             nextLimit: timetable.map { $0.slot(at: Date(), in: timeZone()).nextRate.bytesPerSecond } ?? nil)
    }
}
