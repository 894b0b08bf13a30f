/// Why a config file was refused: every problem at once, each naming the key, the bad
/// value and what was expected, so one edit fixes them all.
package struct ConfigError: Error, Sendable, CustomStringConvertible {
    package struct Problem: Sendable, Equatable, CustomStringConvertible {
        package var key: String
        package var value: String?
        package var expected: String
        package var description: String {
            let what = expected.hasPrefix("unknown") || expected.hasPrefix("is required") ? expected : "expected \(expected)"
            if key.hasPrefix("(") { return expected }
            if let value { return "\(key) = \(value): \(what)" }
            return "\(key): \(what)"
        }
    }

    package var path: String
    package var problems: [Problem]

    package var description: String {
        problems.map { "\(path): \($0)" }.joined(separator: "\n")
    }
}
