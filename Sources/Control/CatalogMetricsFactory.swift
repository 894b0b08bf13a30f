/// The Prometheus text the daemon serves (on the socket and the metrics port): its counters (swift-metrics over swift-prometheus) and the status snapshot's gauges.
import CoreMetrics
import PhotolalaCore
import Prometheus

/// The swift-metrics factory the daemon bootstraps: each counter of `DaemonCounter`
/// becomes a Prometheus counter in the daemon's registry, with its `# HELP`.
///
/// swift-prometheus' own `PrometheusMetricsFactory` registers every metric without help
/// text (and its registry stops the process when one name is registered with two help
/// texts), so this one looks the help up in the catalog. Anything not in the catalog —
/// a metric a library might emit — goes nowhere: the output holds exactly the names the
/// README documents, and no label this project did not choose.
package struct CatalogMetricsFactory: MetricsFactory {
    package let registry: PrometheusCollectorRegistry

    package init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
    }

    /// Creates the series whose label values are known ahead at 0, so they are scraped
    /// before their first event (an alert's `increase()` then sees that event).
    package func seed() {
        for counter in DaemonCounter.allCases {
            for values in counter.knownLabelValues {
                _ = makeCounter(label: counter.name, dimensions: Array(zip(counter.labelNames, values)))
            }
        }
    }

    package func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        guard let counter = DaemonCounter(rawValue: label),
              dimensions.map(\.0) == counter.labelNames else { return NOOPMetricsHandler.instance }
        let descriptor = MetricNameDescriptor(metricName: counter.name, unitName: "", helpText: counter.help)
        return registry.makeCounter(descriptor: descriptor, labels: dimensions)
    }

    package func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        NOOPMetricsHandler.instance
    }

    package func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        NOOPMetricsHandler.instance
    }

    package func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        NOOPMetricsHandler.instance
    }

    package func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        NOOPMetricsHandler.instance
    }

    // Counters live as long as the daemon: the handlers are never destroyed.
    package func destroyCounter(_ handler: any CounterHandler) {}
    package func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {}
    package func destroyRecorder(_ handler: any RecorderHandler) {}
    package func destroyMeter(_ handler: any MeterHandler) {}
    package func destroyTimer(_ handler: any TimerHandler) {}
}
