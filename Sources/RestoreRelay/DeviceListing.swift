import Control
import Foundation
import ManifestFormat
import PhotolalaCore
import RestoreWire
import Vault

/// `photolalactl devices`, decided from what the bucket holds: which devices have a
/// manifest, what each record says, whether this NAS can read it, and the list's order and
/// note. `RestoreService` only fetches the bytes, so every one of these rules can be tested
/// without a bucket.
package struct DeviceListing: Sendable, Equatable {
    /// What the listing shows of one device's objects.
    package struct Seen: Sendable, Equatable {
        package var record = false
        /// An object ends in `.pls`: the manifest is sealed (format 2), record or not.
        package var sealed = false
        package var changed = Date.distantPast

        package init(record: Bool = false, sealed: Bool = false, changed: Date = .distantPast) {
            self.record = record
            self.sealed = sealed
            self.changed = changed
        }
    }

    /// Every device with an object under the account's devices prefix, by id.
    package private(set) var seen: [String: Seen] = [:]

    package init(_ listing: [ListedObject], userId: String) {
        for object in listing {
            guard let (device, isRecord) = ManifestKeys.deviceOf(key: object.key, userId: userId) else { continue }
            var d = seen[device] ?? Seen()
            d.record = d.record || isRecord
            d.sealed = d.sealed || object.key.hasSuffix(".pls")
            d.changed = max(d.changed, object.lastModified ?? .distantPast)
            seen[device] = d
        }
    }

    /// One device's row, from its record's bytes (nil: it has none). Without the account's
    /// key a device of format 2 shows only its id and when its manifest last changed; one
    /// that does not open is named as such. `counter`: the record's, when it opened, for the
    /// caller to hold against the one this NAS remembers (`rolledBack`).
    package static func row(_ id: String, _ seen: Seen, current: Bool, record bytes: [UInt8]?, recordKey: String,
                    keyState: MetadataKeyState) -> (device: DeviceList.Device, counter: Int64?) {
        var device = DeviceList.Device(id: id, name: nil, folders: [], lastBackupAt: nil, files: 0, bytes: 0, current: current,
                                       updatedAt: nil, changedAt: Timestamp.string(seen.changed))
        let format = bytes.flatMap(DeviceRecord.format(of:)) ?? (seen.sealed ? ManifestSegment.sealedFormat : ManifestSegment.formatVersion)
        device.format = format
        var counter: Int64?
        switch format {
        case ManifestSegment.formatVersion:
            device.access = .unencrypted
            if let record = bytes.flatMap(DeviceRecord.decode) { fill(&device, record) }
        case ManifestSegment.sealedFormat:
            guard case .ready(let accountKey) = keyState else {
                device.access = .keyNeeded
                break
            }
            guard let bytes else {
                device.access = .readable
                device.problem = "its device record is missing"
                break
            }
            do {
                let record = try DeviceRecord.open(bytes, key: accountKey.metadataKey, objectKey: recordKey)
                fill(&device, record)
                device.access = .readable
                counter = record.counter
            } catch {
                device.access = .unreadable
                device.problem = notReadable(id)
            }
        default:
            device.access = .unreadable
            device.problem = "its manifest is in format \(format), newer than this photolalad reads: update photolalad"
        }
        return (device, counter)
    }

    /// A device sealed for good (`trace`) whose record or segments are now plaintext: a
    /// downgrade. Shown by its id only (the plaintext record's name is the attacker's).
    static func downgraded(_ id: String, _ seen: Seen, current: Bool, trace: String) -> DeviceList.Device {
        var device = DeviceList.Device(id: id, name: nil, folders: [], lastBackupAt: nil, files: 0, bytes: 0, current: current,
                                       updatedAt: nil, changedAt: Timestamp.string(seen.changed))
        device.format = ManifestSegment.sealedFormat
        device.access = .unreadable
        device.problem = downgradedSentence(id, trace: trace)
        return device
    }

    static func downgradedSentence(_ id: String, trace: String) -> String {
        "the manifest of device \(id) was downgraded in the bucket: it is encrypted for good (\(trace)), and a plaintext record or "
            + "segment was put in its place by someone without the key; refused and never read, --allow-unencrypted or not. Restore from "
            + "another device, or let that device's NAS run: it writes its sealed manifest again"
    }

    static let rolledBack = "its device record is older than one this NAS read before: the bucket was rolled back"

    /// This NAS first, then the most recently backed up (or changed) first.
    package static func sorted(_ list: [DeviceList.Device]) -> [DeviceList.Device] {
        list.sorted { a, b in
            a.current != b.current ? a.current : (a.lastBackupAt ?? a.changedAt ?? "", a.id) > (b.lastBackupAt ?? b.changedAt ?? "", b.id)
        }
    }

    /// What the list says when a device waits for this NAS to hold the key; nil otherwise.
    package static func note(_ list: [DeviceList.Device], keyState: MetadataKeyState) -> String? {
        guard list.contains(where: { $0.access == .keyNeeded }) else { return nil }
        if case .unreadable(let why) = keyState { return "encrypted manifests cannot be read: \(why)" }
        return "names, folders and totals of encrypted manifests need this account's recovery key on this NAS: \(enterHint)"
    }

    package static let enterHint = "sudo photolalactl recovery-key --enter"

    package static func notReadable(_ device: String) -> String {
        "the manifest of device \(device) is not readable with this account's key: it was written with another key, or altered"
    }

    private static func fill(_ device: inout DeviceList.Device, _ record: DeviceRecord) {
        device.name = record.name
        device.folders = record.folders
        device.lastBackupAt = record.lastBackupAt
        device.files = record.files
        device.bytes = record.bytes
        device.updatedAt = record.updatedAt
    }
}
