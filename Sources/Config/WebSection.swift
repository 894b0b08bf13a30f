import Foundation
import TOMLKit
import PhotolalaCore

/// `[web]` (web.md): where the status page listens and how it may be reached.
extension TableReader {
    static let webKeys: Set<String> = ["listen", "hosts", "tls_cert", "tls_key", "allow_plain_http", "session_ttl"]

    mutating func readWebSection(_ root: TOMLTable, into s: inout Settings) {
        guard let web = root["web"]?.table else { return }
        if let v = web["listen"], let text = string("web.listen", v) {
            s.web.listenSet = true
            if text.lowercased() == "off" {
                s.web.listen = nil
            } else if let address = Settings.ListenAddress(parsing: text) {
                s.web.listen = address
            } else {
                problem("web.listen", quote(text), "\"off\" or an address and port such as \"127.0.0.1:8770\", \"0.0.0.0:8770\" or \"[::1]:8770\"")
            }
        }
        if let v = web["hosts"], let list = strings("web.hosts", v) {
            let bad = list.filter { !Self.isHostName($0) }
            if bad.isEmpty { s.web.hosts = list.map { $0.lowercased() } } else {
                problem("web.hosts", quote(bad[0]), "host names the page answers to, such as [\"nas.local\", \"192.168.1.20\"] (a port may follow: \"nas.local:8770\")")
            }
        }
        for (key, keyPath) in [("tls_cert", \Settings.Web.tlsCert), ("tls_key", \Settings.Web.tlsKey)] {
            guard let v = web[key], let path = string("web.\(key)", v), !path.isEmpty else { continue }
            let marker = key == "tls_cert" ? "CERTIFICATE-----" : "PRIVATE KEY-----"
            if let why = Self.pemProblem(path, marker: marker) { problem("web.\(key)", quote(path), why) } else { s.web[keyPath: keyPath] = path }
        }
        if (s.web.tlsCert == nil) != (s.web.tlsKey == nil), web["tls_cert"] != nil || web["tls_key"] != nil,
           problems.allSatisfy({ !$0.key.hasPrefix("web.tls_") }) {
            let missing = s.web.tlsCert == nil ? "web.tls_cert" : "web.tls_key"
            problem(missing, "\"\"", "both web.tls_cert and web.tls_key (a PEM certificate and its private key), or neither")
        }
        if let v = web["allow_plain_http"], let b = bool("web.allow_plain_http", v) { s.web.allowPlainHTTP = b }
        if let v = web["session_ttl"], let d = duration("web.session_ttl", v, from: .seconds(60), to: .seconds(30 * 86400),
                                                         "a duration from 1m to 30d, such as \"12h\"") {
            s.web.sessionTTL = d
        }
        // Beyond loopback, a session cookie over plain HTTP can be read off the network:
        // it takes TLS, or saying so.
        if let listen = s.web.listen, !listen.isLoopback, !s.web.tls, !s.web.allowPlainHTTP,
           problems.allSatisfy({ !$0.key.hasPrefix("web.") }) {
            problem("web.listen", quote(listen.description),
                    "a loopback address (127.0.0.1, [::1]), or set web.tls_cert and web.tls_key (HTTPS), or web.allow_plain_http = true to serve plain HTTP on the network anyway")
        }
    }

    /// A name or an IP literal, optionally with a port: what a browser sends as `Host`.
    static func isHostName(_ text: String) -> Bool {
        guard !text.isEmpty, text.count <= 255 else { return false }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]")
        return text.allSatisfy { allowed.contains($0) } && !text.hasPrefix(".") && !text.hasPrefix("-")
    }

    /// nil when `path` is a readable PEM file holding `-----BEGIN …marker`.
    static func pemProblem(_ path: String, marker: String) -> String? {
        guard path.hasPrefix("/") else { return "an absolute path to a PEM file (or \"\" for none)" }
        guard let data = FileManager.default.contents(atPath: path) else {
            return "a readable PEM file: \(ConfigLoader.unreadableReason(path))"
        }
        let text = String(decoding: data, as: UTF8.self)
        guard text.contains("-----BEGIN "), text.contains(marker) else {
            return "a PEM file (no \"-----BEGIN …\(marker)\" in it)"
        }
        return nil
    }
}
