import Foundation
import PhotolalaCore
import Vault

/// What the account's device records say of one another (privacy.md "No side doors"): the
/// floor a device's manifest is held against (the newest head any other surviving record
/// vouches for), and whether a device is sealed for good (a format-2 trace).
package struct ManifestVouches: Sendable, Equatable {
    /// Every record that opened under the account's key, by device id.
    package private(set) var records: [String: DeviceRecord] = [:]

    package init(records: [String: DeviceRecord]) {
        self.records = records
    }

    /// Reads every device record of `userId` listed in `listing` (keys under the devices
    /// prefix) that opens under `key`; the others say nothing.
    package static func read(_ store: any ManifestObjects, userId: String, listing: [String], key: MetadataKey) async -> ManifestVouches {
        var records: [String: DeviceRecord] = [:]
        for objectKey in listing {
            guard let (device, isRecord) = ManifestKeys.deviceOf(key: objectKey, userId: userId), isRecord,
                  let bytes = try? await store.bytes(objectKey),
                  let record = try? DeviceRecord.open(bytes, key: key, objectKey: objectKey), record.deviceId == device else { continue }
            records[device] = record
        }
        return ManifestVouches(records: records)
    }

    /// The newest counter and segment another device's record vouches for `device`, and
    /// the device that vouches (the highest segment; then the highest counter).
    package func floor(for device: String) -> (head: SeenHead, by: String)? {
        var best: (head: SeenHead, by: String)?
        for (by, record) in records where by != device {
            guard let seen = record.seen?[device] else { continue }
            if best.map({ (seen.seq, seen.counter) > ($0.head.seq, $0.head.counter) }) ?? true { best = (seen, by) }
        }
        return best
    }

    /// Why `device` is sealed for good (format 2), if it is: a sealed object under its
    /// prefix, a head this NAS remembers, or a mention in another device's sealed record.
    /// A plaintext manifest for such a device is a downgrade: refused, never read.
    package func formatTwoTrace(of device: String, listing: [String], remembered: RememberedHead?, userId: String) -> String? {
        let prefix = ManifestKeys(userId: userId, deviceId: device).prefix
        if listing.contains(where: { $0.hasPrefix(prefix) && $0.hasSuffix(".pls") }) {
            return "sealed segments of it are in the bucket"
        }
        if remembered != nil { return "this NAS read its sealed manifest before" }
        if let by = records.first(where: { $0.key != device && $0.value.seen?[device] != nil })?.key {
            return "the sealed record of device \(by) names it"
        }
        return nil
    }
}
