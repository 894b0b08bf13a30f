import Control
import PhotolalaCore

/// Renders a scrape from the status snapshot, for the control socket and the TCP
/// listener alike. Scrapes that arrive while one is being rendered share it: however many
/// scrapers ask at once, the daemon assembles the status once. Nothing is kept between
/// scrapes, so one taken after a `status --json` shows at least what that status showed.
///
/// The first scraper renders in its own task; the others wait on `rendered` for its bytes
/// (no task of its own: a dropped scraper leaves the others their rendering, since
/// `core.status()` answers whatever happens to the caller).
actor MetricsScraper {
    let core: DaemonCore
    let exposition: MetricsExposition
    private var rendering = false
    /// The last rendering, for those that waited on it, and the generation it was told at.
    private var last: (generation: Int, bytes: [UInt8])?
    private let rendered = ChangeFeed()

    init(core: DaemonCore, exposition: MetricsExposition) {
        self.core = core
        self.exposition = exposition
    }

    func scrape() async -> [UInt8] {
        if rendering {
            let since = rendered.generation
            await rendered.wait(since: since)
            if let last, last.generation > since { return last.bytes }
        }
        rendering = true
        let bytes = exposition.render(await core.status())
        rendering = false
        last = (rendered.generation + 1, bytes)
        rendered.changed()
        return bytes
    }
}
