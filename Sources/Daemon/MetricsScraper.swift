import Control
import PhotolalaCore

/// Renders a scrape from the status snapshot, for the control socket and the TCP
/// listener alike. Scrapes that arrive while one is being rendered share it: however many
/// scrapers ask at once, the daemon assembles the status once. Nothing is kept between
/// scrapes, so one taken after a `status --json` shows at least what that status showed.
actor MetricsScraper {
    let core: DaemonCore
    let exposition: MetricsExposition
    private var inFlight: Task<[UInt8], Never>?

    init(core: DaemonCore, exposition: MetricsExposition) {
        self.core = core
        self.exposition = exposition
    }

    func scrape() async -> [UInt8] {
        if let inFlight { return await inFlight.value }
        let (core, exposition) = (self.core, self.exposition)
        let task = Task { exposition.render(await core.status()) }
        inFlight = task
        let bytes = await task.value
        inFlight = nil
        return bytes
    }
}
