#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import PhotolalaCore
import Synchronization

/// One event a line on stderr with its level. Under systemd (JOURNAL_STREAM set) each
/// line starts with the syslog priority `<N>` so journald files it at the right level.
/// Every line passes through `SecretRedactor` first: a secret that slips into a message
/// by mistake is still never written.
package struct StderrLogHandler: LogHandler {
    package var metadata: Logger.Metadata = [:]
    /// Shared by every logger so SIGHUP can change `daemon.log_level` at once.
    package var logLevel: Logger.Level {
        get { LogLevelSwitch.shared.level }
        set { LogLevelSwitch.shared.level = newValue }
    }
    private let label: String
    private let journal: Bool

    package init(label: String) {
        self.label = label
        self.journal = ProcessInfo.processInfo.environment["JOURNAL_STREAM"] != nil
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let meta = merged.isEmpty ? "" : " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\(Self.render($0.value))" }.joined(separator: " ")
        let text = SecretRedactor.shared.redact("\(event.message)\(meta)")
        let body = String(text.map { $0.isNewline ? " " : $0 })
        let line: String
        if journal {
            line = "<\(Self.priority(event.level))>\(event.level): \(body)\n"
        } else {
            line = "\(Date().formatted(.iso8601)) \(event.level) \(label): \(body)\n"
        }
        // One write(2) per line: lines from many tasks never interleave.
        StandardError.write(line)
    }

    static func render(_ value: Logger.MetadataValue) -> String {
        let s = "\(value)"
        return s.contains(" ") ? "\"\(s)\"" : s
    }

    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}

/// The process-wide log level, set from `daemon.log_level` at start and on reload.
package final class LogLevelSwitch: Sendable {
    package static let shared = LogLevelSwitch()
    private let value = Mutex<Logger.Level>(.info)

    package var level: Logger.Level {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }

    package func set(_ level: Settings.LogLevel) {
        self.level = Self.map(level)
    }

    package static func map(_ level: Settings.LogLevel) -> Logger.Level {
        switch level {
        case .trace: .trace
        case .debug: .debug
        case .info: .info
        case .notice: .notice
        case .warning: .warning
        case .error: .error
        }
    }

    /// Installs the stderr handler for every logger in the process.
    package static func bootstrap(_ level: Settings.LogLevel) {
        shared.set(level)
        LoggingSystem.bootstrap { label in StderrLogHandler(label: label) }
    }
}
