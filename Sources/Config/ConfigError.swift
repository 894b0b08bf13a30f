/// Why a config file was refused: every problem at once, each naming the key, the bad
/// value and what was expected, so one edit fixes them all.
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        public var key: String
        public var value: String?
        public var expected: String
        public var description: String {
            let what = expected.hasPrefix("unknown") || expected.hasPrefix("is required") ? expected : "expected \(expected)"
            if key.hasPrefix("(") { return expected }
            if let value { return "\(key) = \(value): \(what)" }
            return "\(key): \(what)"
        }
    }

    public var path: String
    public var problems: [Problem]

    public var description: String {
        problems.map { "\(path): \($0)" }.joined(separator: "\n")
    }
}
