/// How long each step of a sync took: on the log line of every publish, so a slow one says
/// where its time went (the download, the merge, the upload, the bookkeeping).
package struct SyncPhases: Sendable {
    private var laps: [(name: String, took: Duration)] = []
    private var mark = ContinuousClock.now

    package init() {}

    /// Ends the step under way, named `name`.
    package mutating func lap(_ name: String) {
        let now = ContinuousClock.now
        laps.append((name, now - mark))
        mark = now
    }

    /// "12.34": by hand, since a number format style loads ICU's data (megabytes of the
    /// static binary paged in for one log line).
    package static func seconds(_ d: Duration) -> String {
        let centis = Int((Double(d.components.seconds) * 100 + Double(d.components.attoseconds) / 1e16).rounded())
        let fraction = centis % 100
        return "\(centis / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }

    package var description: String {
        laps.map { lap in
            let ms = Double(lap.took.components.seconds) * 1000 + Double(lap.took.components.attoseconds) / 1e15
            return "\(lap.name) \(Int(ms.rounded())) ms"
        }.joined(separator: ", ")
    }
}
