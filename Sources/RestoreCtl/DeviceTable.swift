import Control
import Foundation
import PhotolalaCore
import RestoreFiles
import RestoreWire

/// `photolalactl devices`: the relay's device list, asked for and shown as a table (or
/// its JSON). Here rather than in the CLI, so the CLI imports the command's side only.
package enum DeviceTable {
    /// Asks the daemon (`client`'s timeout applies) and renders the answer.
    package static func text(asking client: ControlClient, json: Bool) throws(ControlClient.Failure) -> String {
        render(try client.call(.devices, as: DeviceList.self), json: json)
    }

    package static func render(_ list: DeviceList, json: Bool) -> String {
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
