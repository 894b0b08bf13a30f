import Foundation
import PhotolalaCore
import Testing
import Config

/// `[web]` (config.md, web.md): every key read, every mistake named by its key.
@Suite struct WebSectionTests {
    let folders = "[watch]\nfolders = [\"/srv/photos\"]\n"

    func problems(_ text: String) -> [String] {
        do {
            _ = try ConfigLoader.parse(folders + text)
            return []
        } catch {
            return error.problems.map(\.key)
        }
    }

    @Test func theDefaultIsLoopback8770NotSetExplicitly() throws {
        let s = try ConfigLoader.parse(folders)
        #expect(s.web.listen == Settings.ListenAddress(host: "127.0.0.1", port: 8770))
        #expect(!s.web.listenSet && !s.web.tls && !s.web.allowPlainHTTP && s.web.hosts.isEmpty)
        #expect(s.web.sessionTTL == .seconds(12 * 3600))
    }

    @Test func everyKeyIsReadAndPrintedBack() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("config-web-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".write(toFile: dir + "/cert.pem", atomically: true, encoding: .utf8)
        try "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n".write(toFile: dir + "/key.pem", atomically: true, encoding: .utf8)
        let s = try ConfigLoader.parse(folders + """
            [web]
            listen = "0.0.0.0:8443"
            hosts = ["NAS.local", "192.168.1.20"]
            tls_cert = "\(dir)/cert.pem"
            tls_key = "\(dir)/key.pem"
            session_ttl = "1d"
            """)
        #expect(s.web.listen == Settings.ListenAddress(host: "0.0.0.0", port: 8443) && s.web.listenSet)
        #expect(s.web.hosts == ["nas.local", "192.168.1.20"])
        #expect(s.web.tls && s.web.sessionTTL == .seconds(86400))
        var again = try ConfigLoader.parse(EffectiveSettings.toml(s))
        again.account.deviceName = s.account.deviceName
        #expect(again == s)
        #expect(try ConfigLoader.parse(folders + "[web]\nlisten = \"off\"\n").web.listen == nil)
    }

    @Test func badValuesNameTheirKeys() {
        #expect(problems("[web]\nlisten = \"8770\"\n") == ["web.listen"])
        #expect(problems("[web]\nlisten = \"0.0.0.0:8770\"\n") == ["web.listen"])  // beyond loopback, no TLS
        #expect(problems("[web]\nlisten = \"0.0.0.0:8770\"\nallow_plain_http = true\n") == [])
        #expect(problems("[web]\ntls_cert = \"/nonexistent/cert.pem\"\n") == ["web.tls_cert"])
        #expect(problems("[web]\nhosts = [\"evil host\"]\n") == ["web.hosts"])
        #expect(problems("[web]\nsession_ttl = \"10s\"\n") == ["web.session_ttl"])
        #expect(problems("[web]\nallow_plain_http = \"yes\"\n") == ["web.allow_plain_http"])
        #expect(problems("[web]\nport = 8770\n") == ["web.port"])
    }

    @Test func aCertificateWithoutItsKeyNamesTheKey() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("config-web-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".write(toFile: dir + "/cert.pem", atomically: true, encoding: .utf8)
        #expect(problems("[web]\ntls_cert = \"\(dir)/cert.pem\"\n") == ["web.tls_key"])
    }
}
