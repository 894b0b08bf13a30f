import Foundation
import PhotolalaCore
import Prometheus

/// One scrape: the status snapshot's gauges and the parts' counters, in the Prometheus
/// text exposition format (version 0.0.4), the same bytes on the control socket
/// (`GET /v1/metrics`) and on the TCP listener (`GET /metrics`).
package struct MetricsExposition: Sendable {
    package static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The registry `CatalogMetricsFactory` fills: the counters.
    package let counters: PrometheusCollectorRegistry

    package init(counters: PrometheusCollectorRegistry) {
        self.counters = counters
    }

    package func render(_ status: DaemonStatus, now: Date = Date()) -> [UInt8] {
        let gauges = PrometheusCollectorRegistry()
        SnapshotGauges.fill(gauges, from: status, now: now)
        var out: [UInt8] = []
        out.reserveCapacity(16 << 10)
        gauges.emit(into: &out)
        counters.emit(into: &out)
        return Self.sorted(out)
    }

    /// The registries write their families in hash order, different on every start: a
    /// person reading `curl` output, and a diff of two scrapes, want them by name.
    /// A family is its `# HELP`/`# TYPE` lines and the samples after them.
    package static func sorted(_ text: [UInt8]) -> [UInt8] {
        var families: [(name: Substring, head: [Substring], samples: [Substring])] = []
        let string = String(decoding: text, as: UTF8.self)
        for line in string.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("# ") {
                let name = line.split(separator: " ", maxSplits: 3).dropFirst(2).first ?? ""
                if families.last?.name != name { families.append((name, [], [])) }
                families[families.count - 1].head.append(line)
            } else if families.isEmpty {
                families.append(("", [], [line]))
            } else {
                families[families.count - 1].samples.append(line)
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(text.count)
        for family in families.sorted(by: { $0.name < $1.name }) {
            for line in family.head + family.samples.sorted() {
                out.append(contentsOf: line.utf8)
                out.append(UInt8(ascii: "\n"))
            }
        }
        return out
    }
}
