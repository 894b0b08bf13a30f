/// Reads the text exposition back the way a scraper does, strictly enough to catch a
/// sample without its family, a family without HELP or TYPE, or a line out of place.
struct ExpositionParser {
    struct Family {
        var help: String?
        var type: String?
        var samples: [(labels: [String: String], value: Double)] = []
    }

    enum Problem: Error, CustomStringConvertible {
        case line(String)
        var description: String { switch self { case .line(let l): "cannot read: \(l)" } }
    }

    private(set) var families: [String: Family] = [:]
    private(set) var order: [String] = []

    init(_ text: String) throws {
        var current: String?
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ", maxSplits: 3).map(String.init)
                guard parts.count == 4 else { throw Problem.line(String(line)) }
                let name = parts[2]
                if current != name {
                    guard families[name] == nil else { throw Problem.line("family \(name) appears twice") }
                    order.append(name)
                    current = name
                }
                if parts[1] == "HELP" { families[name, default: Family()].help = parts[3] } else { families[name, default: Family()].type = parts[3] }
                continue
            }
            let (name, labels, value) = try Self.sample(String(line))
            guard name == current, families[name]?.type != nil else { throw Problem.line("sample outside its family: \(line)") }
            families[name]!.samples.append((labels, value))
        }
    }

    static func sample(_ line: String) throws -> (String, [String: String], Double) {
        guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { throw Problem.line(line) }
        let series = line[..<space]
        guard let brace = series.firstIndex(of: "{") else { return (String(series), [:], value) }
        var labels: [String: String] = [:]
        for pair in series[series.index(after: brace)..<series.index(before: series.endIndex)].split(separator: ",") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            guard kv.count == 2, kv[1].hasPrefix("\""), kv[1].hasSuffix("\"") else { throw Problem.line(line) }
            labels[String(kv[0])] = String(kv[1].dropFirst().dropLast())
        }
        return (String(series[..<brace]), labels, value)
    }

    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        families[name]?.samples.first { $0.labels == labels }?.value
    }

    /// The label value of the one series at 1 in a one-of family (nil when none is).
    func current(_ name: String, label: String) -> String? {
        let on = families[name]?.samples.filter { $0.value == 1 } ?? []
        return on.count == 1 ? on[0].labels[label] : nil
    }
}
