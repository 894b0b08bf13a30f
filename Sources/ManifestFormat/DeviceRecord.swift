import Foundation

/// `device.json`: what `photolalactl devices` shows of a NAS without replaying its
/// manifest. Rewritten after every manifest segment; the segments stay the truth.
package struct DeviceRecord: Codable, Sendable, Equatable {
    package var format: Int
    package var deviceId: String
    /// `account.device_name` (default: the host name) when the record was written.
    package var name: String
    /// The watched folders, as configured.
    package var folders: [String]
    /// When the newest change in the manifest was recorded (ISO 8601), nil before the first.
    package var lastBackupAt: String?
    /// Files present now, and their bytes.
    package var files: Int64
    package var bytes: Int64
    /// The last log segment written, and the snapshot it builds on (0: none).
    package var logSeq: Int64
    package var snapshotSeq: Int64
    package var updatedAt: String
    /// The software that wrote it, e.g. "photolalad 0.1.0".
    package var software: String

    package init(deviceId: String, name: String, folders: [String], lastBackupAt: String?, files: Int64, bytes: Int64,
                logSeq: Int64, snapshotSeq: Int64, updatedAt: String, software: String) {
        format = 1
        self.deviceId = deviceId
        self.name = name
        self.folders = folders
        self.lastBackupAt = lastBackupAt
        self.files = files
        self.bytes = bytes
        self.logSeq = logSeq
        self.snapshotSeq = snapshotSeq
        self.updatedAt = updatedAt
        self.software = software
    }

    package func encoded() -> [UInt8] {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        return Array((try? e.encode(self)) ?? Data())
    }

    package static func decode(_ bytes: [UInt8]) -> DeviceRecord? {
        try? JSONDecoder().decode(DeviceRecord.self, from: Data(bytes))
    }
}
