import MetricsExport
import PhotolalaCore

/// Renders a scrape from the status snapshot, for the control socket and the TCP
/// listener alike. Scrapes that arrive together share one rendering, and one less than a
/// second old is served again: a scraper in a loop (or many at once) costs the daemon at
/// most one status assembly a second, whatever the queue's size.
actor MetricsScraper {
    let core: DaemonCore
    let exposition: MetricsExposition
    private var last: (at: ContinuousClock.Instant, bytes: [UInt8])?
    private var inFlight: Task<[UInt8], Never>?
    static let reuseFor: Duration = .seconds(1)

    init(core: DaemonCore, exposition: MetricsExposition) {
        self.core = core
        self.exposition = exposition
    }

    func scrape() async -> [UInt8] {
        if let last, ContinuousClock.now - last.at < Self.reuseFor { return last.bytes }
        if let inFlight { return await inFlight.value }
        let (core, exposition) = (self.core, self.exposition)
        let task = Task { exposition.render(await core.status()) }
        inFlight = task
        let bytes = await task.value
        inFlight = nil
        last = (.now, bytes)
        return bytes
    }
}
