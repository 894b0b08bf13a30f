import Foundation
import PhotolalaCore
import Testing
import Config

@Suite struct StageSectionsTests {
    let folders = "[watch]\nfolders = [\"/srv/photos\"]\n"

    func problems(_ text: String) -> [String] {
        do {
            _ = try ConfigLoader.parse(folders + text)
            return []
        } catch {
            return error.problems.map(\.key)
        }
    }

    @Test func theDefaultsAreConfigMd() throws {
        let s = try ConfigLoader.parse(folders)
        #expect(s.upload.inventoryInterval == .seconds(86400))
        #expect(s.catalog.enabled)
        #expect(s.catalog.publishInterval == .seconds(600))
        #expect(s.catalog.checkInterval == .seconds(3600))
        #expect(s.tls.caFile == nil)
        #expect(s.metrics.listen == nil)
    }

    @Test func everyKeyIsRead() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("config-ca-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let ca = dir + "/ca.pem"
        try Data("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".utf8).write(to: URL(fileURLWithPath: ca))
        let s = try ConfigLoader.parse(folders + """
            [upload]
            inventory_interval = "6h"
            [catalog]
            enabled = false
            publish_interval = "30s"
            check_interval = "15m"
            [tls]
            ca_file = "\(ca)"
            [metrics]
            listen = "127.0.0.1:9469"
            """)
        #expect(s.upload.inventoryInterval == .seconds(6 * 3600))
        #expect(!s.catalog.enabled)
        #expect(s.catalog.publishInterval == .seconds(30))
        #expect(s.catalog.checkInterval == .seconds(900))
        #expect(s.tls.caFile == ca)
        #expect(s.metrics.listen == Settings.ListenAddress(host: "127.0.0.1", port: 9469))
        // What --check-config prints reads back to the same settings (the device name
        // is printed resolved).
        var again = try ConfigLoader.parse(EffectiveSettings.toml(s))
        again.account.deviceName = s.account.deviceName
        #expect(again == s)
    }

    @Test func badValuesNameTheirKeys() {
        #expect(problems("[upload]\ninventory_interval = \"5s\"\n") == ["upload.inventory_interval"])
        #expect(problems("[catalog]\nenabled = \"yes\"\n") == ["catalog.enabled"])
        #expect(problems("[catalog]\npublish_interval = \"soon\"\ncheck_interval = 1\n") == ["catalog.publish_interval", "catalog.check_interval"])
        #expect(problems("[catalog]\nthumbnails = true\n") == ["catalog.thumbnails"])
        #expect(problems("[metrics]\nlisten = \"9469\"\n") == ["metrics.listen"])
        #expect(problems("[metrics]\nlisten = \"127.0.0.1:99999\"\n") == ["metrics.listen"])
        #expect(problems("[tls]\nca_file = \"relative.pem\"\n") == ["tls.ca_file"])
        #expect(problems("[tls]\nca_file = \"/nonexistent/ca.pem\"\n") == ["tls.ca_file"])
    }

    @Test func aCAFileWithoutCertificatesIsRefusedWithWhy() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("not-pem-\(UUID().uuidString)").path
        try Data("hello".utf8).write(to: URL(fileURLWithPath: path))
        do {
            _ = try ConfigLoader.parse(folders + "[tls]\nca_file = \"\(path)\"\n")
            Issue.record("expected an error")
        } catch {
            #expect(error.description.contains("BEGIN CERTIFICATE"))
        }
    }

    @Test func offAndAnEmptyCAFileMeanNone() throws {
        let s = try ConfigLoader.parse(folders + "[tls]\nca_file = \"\"\n[metrics]\nlisten = \"off\"\n")
        #expect(s.tls.caFile == nil && s.metrics.listen == nil)
    }

    @Test(arguments: [
        ("127.0.0.1:9469", "127.0.0.1", 9469), ("[::1]:9469", "::1", 9469), ("localhost:1", "localhost", 1),
        ("0.0.0.0:65535", "0.0.0.0", 65535),
    ])
    func listenAddresses(text: String, host: String, port: Int) {
        let a = Settings.ListenAddress(parsing: text)
        #expect(a?.host == host && a?.port == port)
        #expect(a?.description == text)
    }

    @Test(arguments: ["9469", ":9469", "host:", "host:0", "host:x1", "[::1]9469", "::1:9469", "h:+80"])
    func notListenAddresses(text: String) {
        #expect(Settings.ListenAddress(parsing: text) == nil)
    }
}
