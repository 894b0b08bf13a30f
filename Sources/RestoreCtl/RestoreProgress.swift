import Foundation
import PhotolalaCore
import RestoreWire

/// Where a restore stands, as the command shows it: counts, bytes, a rate over the last
/// few seconds and the time left at that rate. A value, so the bar can be tested with
/// plain numbers.
package struct RestoreProgress: Sendable, Equatable {
    package var filesTotal = 0
    package var bytesTotal: Int64 = 0
    package var restored = 0
    package var alreadyThere = 0
    package var kept = 0
    package var failed = 0
    /// Bytes written (and checked) or found already there.
    package var bytesDone: Int64 = 0
    /// Bytes received so far, including files still arriving.
    package var bytesMoved: Int64 = 0
    package var waitingArchived = 0
    package var archiveClass: String?
    private var samples: [(time: TimeInterval, bytes: Int64)] = []
    package var window: TimeInterval = 5

    package init(filesTotal: Int = 0, bytesTotal: Int64 = 0) {
        self.filesTotal = filesTotal
        self.bytesTotal = bytesTotal
    }

    package static func == (a: RestoreProgress, b: RestoreProgress) -> Bool {
        a.filesTotal == b.filesTotal && a.bytesTotal == b.bytesTotal && a.restored == b.restored && a.alreadyThere == b.alreadyThere
            && a.kept == b.kept && a.failed == b.failed && a.bytesDone == b.bytesDone && a.bytesMoved == b.bytesMoved
    }

    package var filesDone: Int { restored + alreadyThere + kept + failed }

    package mutating func moved(_ bytes: Int64, now: Date) {
        bytesMoved += bytes
        let t = now.timeIntervalSince1970
        samples.append((t, bytesMoved))
        while let first = samples.first, t - first.time > window, samples.count > 2 { samples.removeFirst() }
    }

    /// Bytes per second over the window (0 before two samples).
    package func rate(now: Date) -> Double {
        guard let first = samples.first, let last = samples.last else { return 0 }
        let span = max(now.timeIntervalSince1970, last.time) - first.time
        guard span > 0.2 else { return 0 }
        return Double(last.bytes - first.bytes) / span
    }

    /// Seconds left at the current rate; nil when unknown (no rate yet, or waiting on archives).
    package func eta(now: Date) -> Double? {
        let r = rate(now: now)
        guard r > 0, waitingArchived == 0 else { return nil }
        return Double(max(0, bytesTotal - max(bytesDone, bytesMoved))) / r
    }

    /// `[#####-------]  41%  205/500 files  1.0/2.5 GB  85.3 MB/s  ETA 18s`.
    package func line(now: Date, width: Int = 24) -> String {
        let fraction = bytesTotal > 0 ? Double(min(bytesTotal, max(bytesDone, bytesMoved))) / Double(bytesTotal)
            : (filesTotal > 0 ? Double(filesDone) / Double(filesTotal) : 1)
        let filled = max(0, min(width, Int((fraction * Double(width)).rounded(.down))))
        var text = "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "]"
        text += String(format: " %3d%%", Int((fraction * 100).rounded(.down)))
        text += "  \(filesDone)/\(filesTotal) files  \(Units.humanBytes(max(bytesDone, bytesMoved)))/\(Units.humanBytes(bytesTotal))"
        let r = rate(now: now)
        if r > 0 { text += "  \(Units.humanBytes(Int64(r)))/s" }
        if let eta = eta(now: now) { text += "  ETA \(Self.duration(eta))" }
        if waitingArchived > 0, let c = archiveClass {
            text += "  waiting for \(waitingArchived) in \(c) (\(ArchiveClass.typicalWait(c)))"
        }
        return text
    }

    package static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m\(String(format: "%02d", s % 60))s" }
        return "\(s / 3600)h\(String(format: "%02d", (s % 3600) / 60))m"
    }
}
