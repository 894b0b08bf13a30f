import Foundation
import Testing
@testable import MetricsExport
import PhotolalaCore

@Suite("the exposition")
struct MetricsExpositionTests {
    @Test func rendersAFreshSnapshot() {
        let text = String(decoding: MetricsExposition(counters: .init()).render(DaemonStatus()), as: UTF8.self)
        #expect(text.contains("photolala_files{state=\"pending\"} 0.0"))
    }
}
