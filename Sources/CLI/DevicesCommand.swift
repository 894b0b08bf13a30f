import ArgumentParser
import Control
import Foundation
import PhotolalaCore

/// `photolalactl devices [--json]`: this account's devices that have a manifest in the
/// bucket, read from the bucket (a new NAS signed in with the same Apple ID sees the old one).
struct DevicesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "The NAS devices of this account that have a manifest: name, id, last backup, files, bytes.")
    @OptionGroup(title: "Global options") var options: CtlOptions
    @Flag(name: .long, help: "One JSON object {\"devices\": [...]}.") var json = false

    func run() throws {
        var client = options.client()
        client.timeout = 120
        let list: DeviceList
        do {
            list = try client.call(.devices, as: DeviceList.self)
        } catch {
            throw CtlFailure.exit(error)
        }
        print(Self.render(list, json: json), terminator: "")
    }

    static func render(_ list: DeviceList, json: Bool) -> String {
        if json {
            return String(decoding: (try? ControlJSON.encode(list, pretty: true)) ?? [], as: UTF8.self) + "\n"
        }
        if list.devices.isEmpty {
            return "No device of this account has a manifest in the bucket yet (one appears once a NAS has backed up files).\n"
        }
        let rows = list.devices.map { d in
            [d.name ?? "(unnamed)", d.id, d.lastBackupAt ?? "never", "\(d.files)", Units.humanBytes(d.bytes), d.current ? "this NAS" : ""]
        }
        let header = ["NAME", "ID", "LAST BACKUP", "FILES", "SIZE", ""]
        let widths = (0..<header.count).map { i in ([header] + rows).map { $0[i].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in i == cells.count - 1 ? c : c.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }
        var out = [line(header)] + rows.map(line)
        for d in list.devices where !d.folders.isEmpty {
            out.append("\(d.name ?? d.id): \(d.folders.joined(separator: ", "))")
        }
        return out.joined(separator: "\n") + "\n"
    }
}
