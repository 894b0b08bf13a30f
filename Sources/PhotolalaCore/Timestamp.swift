import Foundation

/// ISO 8601 UTC timestamps as the contract writes them ("2026-11-22T07:00:00Z").
package enum Timestamp {
    package static func string(_ date: Date) -> String {
        date.formatted(.iso8601)
    }

    /// Accepts fractional seconds too, as backend-api.md allows.
    package static func parse(_ text: String) -> Date? {
        if let d = try? Date(text, strategy: .iso8601) { return d }
        return try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
