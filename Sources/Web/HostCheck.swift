import PhotolalaCore

/// Which `Host` headers the page answers (web.md "Every response"): the listen address,
/// `localhost` when it listens on loopback, an address of this machine when it listens on
/// every address (`0.0.0.0`, `::`), and the names in `[web] hosts` — always with the port
/// it is bound to. Anything else is a name an attacker's DNS points here (rebinding) and
/// gets 421. Pure: the machine's addresses come in.
package struct HostCheck: Sendable, Equatable {
    let port: Int
    let tls: Bool
    /// Lower-case names without brackets: `127.0.0.1`, `::1`, `nas.local`.
    let names: Set<String>
    /// `[web] hosts` entries that name their own port (`nas.local:8443`: a reverse proxy).
    let withPorts: Set<String>

    package init(listen: Settings.ListenAddress, boundPort: Int, tls: Bool, hosts: [String], localAddresses: [String]) {
        port = boundPort
        self.tls = tls
        var names: Set<String> = []
        var withPorts: Set<String> = []
        let host = Self.bare(listen.host.lowercased())
        if host == "0.0.0.0" || host == "::" {
            names.formUnion(localAddresses.map { Self.bare($0.lowercased()) })
            names.formUnion(["localhost", "127.0.0.1", "::1"])
        } else {
            names.insert(host)
            if listen.isLoopback || host == "localhost" { names.insert("localhost") }
        }
        for entry in hosts {
            let (name, port) = Self.split(entry.lowercased())
            if let port { withPorts.insert("\(name):\(port)") } else { names.insert(name) }
        }
        self.names = names
        self.withPorts = withPorts
    }

    package func allows(_ header: String?) -> Bool {
        guard let header, !header.isEmpty, header.count <= 300 else { return false }
        var (name, port) = Self.split(header.lowercased())
        if name.hasSuffix(".") { name.removeLast() }
        guard !name.isEmpty else { return false }
        let effective = port ?? (tls ? 443 : 80)
        if withPorts.contains("\(name):\(effective)") { return true }
        return effective == self.port && names.contains(name)
    }

    /// `name:port`, `[v6]:port`, `name` → the name without brackets and the port, if any.
    static func split(_ text: String) -> (String, Int?) {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return ("", nil) }
            let name = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if rest.isEmpty { return (name, nil) }
            guard rest.hasPrefix(":"), let p = Int(rest.dropFirst()), (1...65535).contains(p) else { return ("", nil) }
            return (name, p)
        }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        switch parts.count {
        case 1: return (text, nil)
        case 2:
            guard let p = Int(parts[1]), (1...65535).contains(p) else { return ("", nil) }
            return (String(parts[0]), p)
        default:
            // An IPv6 literal without brackets is not a valid Host.
            return ("", nil)
        }
    }

    static func bare(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }
}
