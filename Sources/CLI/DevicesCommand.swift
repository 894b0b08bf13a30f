import ArgumentParser
import Control
import Foundation
import PhotolalaCore
import RestoreCtl
import RestoreFiles
import RestoreWire

/// `photolalactl devices [--json]`: this account's devices that have a manifest in the
/// bucket, read from the bucket (a new NAS signed in with the same Apple ID sees the old one).
struct DevicesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "The NAS devices of this account that have a manifest: name, id, last backup, files, bytes.",
        discussion: """
            Manifests are encrypted with the account's key: on a NAS that does not hold it yet, only \
            the ids and when each manifest last changed are shown, until the recovery key is entered \
            (sudo photolalactl recovery-key --enter). A device whose manifest does not open with this \
            account's key is named as such; one still in the old plaintext format is marked \
            "unencrypted" and restored only with --allow-unencrypted.
            """)
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
        let rows = list.devices.map { d -> [String] in
            let notes = [d.current ? "this NAS" : nil, Self.accessWord(d.access)].compactMap { $0 }.joined(separator: ", ")
            switch d.access {
            case .keyNeeded?, .unreadable?:
                // Nothing but what the listing says: names and totals are in the sealed record.
                return [d.access == .keyNeeded ? "(needs the recovery key)" : "(not readable)", d.id, "changed " + (d.changedAt ?? "?"), "-", "-", notes]
            default:
                return [d.name.map(RestorePlan.shown) ?? "(unnamed)", d.id, d.lastBackupAt ?? "never", "\(d.files)", Units.humanBytes(d.bytes), notes]
            }
        }
        let header = ["NAME", "ID", "LAST BACKUP", "FILES", "SIZE", ""]
        let widths = (0..<header.count).map { i in ([header] + rows).map { $0[i].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in i == cells.count - 1 ? c : c.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }
        var out = [line(header)] + rows.map(line)
        for d in list.devices where !d.folders.isEmpty {
            out.append("\(RestorePlan.shown(d.name ?? d.id)): \(d.folders.map(RestorePlan.shown).joined(separator: ", "))")
        }
        for d in list.devices {
            if let problem = d.problem { out.append("\(d.id): \(problem)") }
        }
        if let note = list.note { out.append(note) }
        return out.joined(separator: "\n") + "\n"
    }

    static func accessWord(_ access: DeviceList.Device.Access?) -> String? {
        switch access {
        case .keyNeeded?: "encrypted, key needed"
        case .unreadable?: "not readable with this account's key"
        case .unencrypted?: "unencrypted (old format)"
        case .readable?, nil: nil
        }
    }
}
