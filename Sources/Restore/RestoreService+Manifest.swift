import Bucket
import Control
import Foundation
import Manifest
import PhotolalaCore

/// The account's devices and their manifests, as the bucket holds them.
extension RestoreService {
    /// `photolalactl devices`: every device with a manifest under this account, this NAS first.
    package func devices() async -> ControlResponse {
        let reached = await access()
        guard case .ready(let grant, let userId) = reached else {
            if case .unavailable(let response) = reached { return response }
            return .error(503, "unavailable", "the bucket cannot be reached now")
        }
        var attempt = 0
        var refreshed = false
        while true {
            do {
                let store = try ManifestStore(grant: grant, userId: userId, trust: options.trust, http: http, clockOffset: clockOffset, logger: logger)
                let keys = try await store.keys(under: ManifestKeys.devicesPrefix(userId))
                var found: [String: Bool] = [:]
                for key in keys {
                    guard let (device, isRecord) = ManifestKeys.deviceOf(key: key, userId: userId) else { continue }
                    found[device] = (found[device] ?? false) || isRecord
                }
                let current = await account.deviceId
                var list: [DeviceList.Device] = []
                for (id, hasRecord) in found {
                    let layout = ManifestKeys(userId: userId, deviceId: id)
                    let record = hasRecord ? try await store.bytes(layout.record).flatMap(DeviceRecord.decode) : nil
                    list.append(DeviceList.Device(
                        id: id, name: record?.name, folders: record?.folders ?? [], lastBackupAt: record?.lastBackupAt,
                        files: record?.files ?? 0, bytes: record?.bytes ?? 0, current: id == current, updatedAt: record?.updatedAt))
                }
                list.sort { a, b in
                    a.current != b.current ? a.current : (a.lastBackupAt ?? "", a.id) > (b.lastBackupAt ?? "", b.id)
                }
                return .json(DeviceList(devices: list))
            } catch {
                if await shouldRetry(error, grant: grant, attempt: &attempt, refreshed: &refreshed) { continue }
                return .error(502, "storage_error", "could not list the devices in the bucket: \(error)")
            }
        }
    }

    /// `GET /v1/manifest?device=ID`: the device's manifest segments, checked, then a report
    /// (see `ManifestFrames`).
    package func manifest(device: String) async -> ControlResponse {
        guard !device.isEmpty, device.utf8.count <= 64, device.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x41 && $0 <= 0x5a) }) else {
            return .error(400, "bad_request", "device must be a device id (photolalactl devices lists them)")
        }
        let reached = await access()
        guard case .ready(let grant, let userId) = reached else {
            if case .unavailable(let response) = reached { return response }
            return .error(503, "unavailable", "the bucket cannot be reached now")
        }
        let store: ManifestStore
        do {
            store = try ManifestStore(grant: grant, userId: userId, trust: options.trust, http: http, clockOffset: clockOffset, logger: logger)
        } catch {
            return .error(502, "storage_error", "\(error)")
        }
        let logger = self.logger
        return .stream { writer in
            do {
                try await writer.begin(contentType: "application/octet-stream", contentLength: nil)
                let reader = ManifestReader(store: store, keys: ManifestKeys(userId: userId, deviceId: device))
                var report = try await reader.read { _, bytes in try await writer.write(ManifestFrames.segment(bytes)) }
                if report.segments == 0 && report.problems.isEmpty { report.problems.append("no manifest for device \(device)") }
                try await writer.write(ManifestFrames.report(report))
                try await writer.finish()
            } catch {
                // Cut off without a report: the command takes it for an error.
                logger.warning("a manifest could not be sent whole: \(error)")
            }
        }
    }
}
