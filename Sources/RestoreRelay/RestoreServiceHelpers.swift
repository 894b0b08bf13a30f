import Control
import ManifestFormat
import PhotolalaCore
import RestoreWire
import Vault

/// The restore service's pure helpers: what they answer depends on their arguments alone.
extension RestoreService {
    /// A segment (format 2's plaintext, or a format-1 object) without the records whose
    /// names `mayName` refuses; one that does not decode goes as it came (the command
    /// refuses it, as it would have).
    static func only(_ bytes: [UInt8], sealed: Bool, mayName: (String) -> Bool) -> [UInt8] {
        let decoded = sealed ? try? ManifestSegment.decode(plaintext: bytes) : try? ManifestSegment.decode(bytes)
        guard let segment = decoded else { return bytes }
        let kept = segment.entries.filter { entry in
            entry.path.isEmpty ? mayName(entry.folder) : mayName(entry.folder + "/" + String(decoding: entry.path, as: UTF8.self))
        }
        guard kept.count < segment.entries.count else { return bytes }
        var encoder = ManifestSegmentEncoder(header: segment.header, format: sealed ? ManifestSegment.sealedFormat : ManifestSegment.formatVersion)
        for entry in kept { encoder.append(entry) }
        return sealed ? encoder.plaintext() : encoder.finish()
    }

    /// What the account's device records say of one another (the floor, format-2 traces):
    /// read when this NAS holds the key; without it, only the listing and this NAS's memory
    /// can tell a device is sealed for good.
    static func vouches(_ store: ManifestReads, userId: String, listing: [String], keyState: MetadataKeyState) async -> ManifestVouches {
        guard case .ready(let accountKey) = keyState else { return ManifestVouches(records: [:]) }
        return await ManifestVouches.read(store, userId: userId, listing: listing, key: accountKey.metadataKey)
    }

    static func isMD5(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    static func photos(_ userId: String) -> String { "photos/\(userId)/" }

    static func finish(_ writer: ControlStreamWriter, begun: Bool) async {
        if !begun { try? await writer.begin(contentType: "application/octet-stream", contentLength: 0) }
        try? await writer.finish()
    }

    static func isDeviceId(_ device: String) -> Bool {
        !device.isEmpty && device.utf8.count <= 64 && device.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x41 && $0 <= 0x5a) })
    }

    /// What a restore's every record in the trail says of it.
    static func auditDetails(_ r: RestoreReport) -> AuditDetails {
        var details: AuditDetails = ["device": .string(r.device), "destination": .string(r.to ?? "original folders")]
        if let deviceId = r.deviceId { details["deviceId"] = .string(deviceId) }
        if let asOf = r.asOf { details["asOf"] = .string(asOf) }
        return details
    }

    /// The end of a restore in `details`; answers whether it restored everything it was asked.
    static func finished(_ o: RestoreReport.Outcome, files: Int, into details: inout AuditDetails) -> Bool {
        details["step"] = "finished"
        details["files"] = .int(Int64(files))
        details["restored"] = .int(Int64(o.restored))
        details["alreadyThere"] = .int(Int64(o.alreadyThere))
        details["kept"] = .int(Int64(o.kept))
        details["failed"] = .int(Int64(o.failed))
        details["refused"] = .int(Int64(o.refused))
        if o.waitingArchived > 0 { details["waitingArchived"] = .int(Int64(o.waitingArchived)) }
        if o.interrupted { details["interrupted"] = true }
        if let stopped = o.stopped { details["stopped"] = .string(stopped) }
        return o.failed == 0 && o.kept == 0 && o.refused == 0 && o.waitingArchived == 0 && !o.interrupted && o.stopped == nil
    }

    static func sizeMismatch(md5: String, found: Int64, expected: Int64) -> ControlResponse {
        let size = found < 0 ? "an unknown number of" : "\(found)"
        return .error(422, "size_mismatch",
                      "its object photos/…/\(md5).dat holds \(size) bytes in the bucket, not the \(expected) expected: it was replaced or cut in the bucket; not read")
    }
}
