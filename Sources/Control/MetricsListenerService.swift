import Logging
import PhotolalaCore
import ServiceLifecycle

/// The metrics listener's lifetime as a service of the daemon's group: listens while
/// `metrics.listen` is set, moves when a reload changes it, and stops with the daemon.
///
/// An address it cannot use (a port taken, an address not on this machine) must not
/// stop the backup: the daemon runs on, the problem is in the log and in status, and the
/// address is tried again every 30 s.
package actor MetricsListenerService: Service {
    private var address: Settings.ListenAddress?
    private var listener: MetricsListener?
    private var failure: String?
    private let render: @Sendable () async -> [UInt8]
    private let limits: MetricsListener.Limits
    private let logger: Logger
    private let wake = ChangeFeed()
    private let retryInterval: Duration

    package init(address: Settings.ListenAddress?, limits: MetricsListener.Limits = MetricsListener.Limits(),
                retryInterval: Duration = .seconds(30), logger: Logger, render: @escaping @Sendable () async -> [UInt8]) {
        self.address = address
        self.limits = limits
        self.retryInterval = retryInterval
        self.logger = logger
        self.render = render
    }

    /// A new `metrics.listen` (reload): the listener moves at once.
    package func apply(_ new: Settings.ListenAddress?) async {
        guard new != address else { return }
        address = new
        wake.changed()
    }

    /// Why the configured address is not served, in words for status; nil when all is well.
    package var problem: String? { failure }

    /// The port served now (tests listen on port 0).
    package var boundPort: Int? { listener?.port }

    package func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let since = self.wake.generation
                await self.listen()
                let retry: ContinuousClock.Instant? = await self.failure == nil ? nil : .now + self.retryInterval
                await self.wake.wait(since: since, until: retry)
            }
        }
        await listener?.stop()
        listener = nil
    }

    /// Binds the configured address unless it is already served; closes the listener
    /// when the address changed or was turned off.
    private func listen() async {
        if let listener, listener.address == address { return }
        if let old = listener {
            await old.stop()
            listener = nil
            logger.notice("metrics listener on \(old.address) closed")
        }
        guard let address else {
            failure = nil
            return
        }
        do {
            let bound = try await MetricsListener.start(address: address, limits: limits, logger: logger, render: render)
            listener = bound
            if failure != nil { logger.notice("metrics served again on \(address)") }
            failure = nil
            logger.notice("serving Prometheus metrics", metadata: ["address": "\(address.host)", "port": "\(bound.port)", "path": "/metrics"])
        } catch {
            if failure != error.description { logger.error("\(error.description) (tried again every \(retryInterval))") }
            failure = error.description
        }
    }
}
