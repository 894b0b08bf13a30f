import Foundation
import PhotolalaCore
import TOMLKit

/// `[catalog]`, `[tls]` and `[metrics]`: the sections of the stages that came after the
/// upload pipeline (config.md).
extension TableReader {
    mutating func readStageSections(_ root: TOMLTable, into s: inout Settings) {
        let catalog = root["catalog"]?.table
        if let v = catalog?["enabled"], let b = bool("catalog.enabled", v) { s.catalog.enabled = b }
        if let v = catalog?["publish_interval"], let d = duration("catalog.publish_interval", v) {
            if d < .seconds(1) || d > .seconds(86400) { problem("catalog.publish_interval", render(v), "a duration from 1s to 1d") } else { s.catalog.publishInterval = d }
        }
        if let v = catalog?["check_interval"], let d = duration("catalog.check_interval", v) {
            if d < .seconds(10) || d > .seconds(7 * 86400) { problem("catalog.check_interval", render(v), "a duration from 10s to 7d") } else { s.catalog.checkInterval = d }
        }

        if let v = root["tls"]?.table?["ca_file"], let path = string("tls.ca_file", v), !path.isEmpty {
            if let why = Self.caFileProblem(path) { problem("tls.ca_file", quote(path), why) } else { s.tls.caFile = path }
        }

        if let v = root["metrics"]?.table?["listen"], let text = string("metrics.listen", v) {
            if text.lowercased() == "off" || text.isEmpty {
                s.metrics.listen = nil
            } else if let address = Settings.ListenAddress(parsing: text) {
                s.metrics.listen = address
            } else {
                problem("metrics.listen", quote(text), "\"off\" or an address and port such as \"127.0.0.1:9469\" or \"[::1]:9469\"")
            }
        }
    }

    /// nil when `path` is a readable file holding at least one PEM certificate.
    static func caFileProblem(_ path: String) -> String? {
        guard path.hasPrefix("/") else { return "an absolute path to a PEM file of CA certificates (or \"\" for none)" }
        guard let data = FileManager.default.contents(atPath: path) else {
            return "a readable PEM file of CA certificates: \(ConfigLoader.unreadableReason(path))"
        }
        guard String(decoding: data, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") else {
            return "a PEM file of CA certificates (no \"-----BEGIN CERTIFICATE-----\" in it)"
        }
        return nil
    }
}
