import CoreMetrics
import MetricsTestKit
import Testing
import PhotolalaCore

@Suite("the counters' catalog")
struct DaemonCounterTests {
    @Test("names are photolala_ snake case ending in _total, with help and snake-case label names")
    func namesFollowPrometheusRules() {
        let name = /photolala_[a-z0-9_]+_total/
        let label = /[a-z][a-z_]*/
        for counter in DaemonCounter.allCases {
            #expect(counter.name.wholeMatch(of: name) != nil, "\(counter.name)")
            #expect(counter.help.count > 20, "\(counter.name) needs a sentence of help")
            #expect(!counter.help.contains("\n"))
            for l in counter.labelNames { #expect(l.wholeMatch(of: label) != nil, "\(counter.name): \(l)") }
            for values in counter.knownLabelValues { #expect(values.count == counter.labelNames.count, "\(counter.name)") }
        }
        #expect(Set(DaemonCounter.allCases.map(\.name)).count == DaemonCounter.allCases.count)
    }

    @Test("an increment reaches the factory of the task, with its labels in order")
    func incrementsReachTheTaskFactory() throws {
        let metrics = TestMetrics()
        withMetricsFactory(metrics) {
            DaemonCounter.s3Requests.increment("PutObject", "2xx")
            DaemonCounter.s3Requests.increment("PutObject", "2xx")
            DaemonCounter.uploadedBytes.increment(by: 4096)
            DaemonCounter.uploadedFiles.increment(by: 0)
        }
        let puts = try metrics.expectCounter("photolala_s3_requests_total", [("operation", "PutObject"), ("status_class", "2xx")])
        #expect(puts.totalValue == 2)
        #expect(try metrics.expectCounter("photolala_uploaded_bytes_total").totalValue == 4096)
        // Nothing to count is not a series created for nothing.
        #expect(throws: (any Error).self) { try metrics.expectCounter("photolala_uploaded_files_total") }
    }

    @Test("a scope keeps the factory it was made under, for threads outside the task")
    func scopeKeepsItsFactory() throws {
        let metrics = TestMetrics()
        let scope = withMetricsFactory(metrics) { DaemonCounter.Scope() }
        scope.increment(.inotifyOverflows)
        #expect(try metrics.expectCounter("photolala_inotify_overflows_total").totalValue == 1)
    }

    @Test("status classes", arguments: [(200, "2xx"), (204, "2xx"), (301, "3xx"), (403, "4xx"), (503, "5xx"), (0, "error"), (999, "error")])
    func statusClasses(status: Int, expected: String) {
        #expect(DaemonCounter.statusClass(status) == expected)
    }
}
