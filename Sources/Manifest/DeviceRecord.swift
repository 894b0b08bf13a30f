import Foundation

/// `device.json`: what `photolalactl devices` shows of a NAS without replaying its
/// manifest. Rewritten after every manifest segment; the segments stay the truth.
public struct DeviceRecord: Codable, Sendable, Equatable {
    public var format: Int
    public var deviceId: String
    /// `account.device_name` (default: the host name) when the record was written.
    public var name: String
    /// The watched folders, as configured.
    public var folders: [String]
    /// When the newest change in the manifest was recorded (ISO 8601), nil before the first.
    public var lastBackupAt: String?
    /// Files present now, and their bytes.
    public var files: Int64
    public var bytes: Int64
    /// The last log segment written, and the snapshot it builds on (0: none).
    public var logSeq: Int64
    public var snapshotSeq: Int64
    public var updatedAt: String
    /// The software that wrote it, e.g. "photolalad 0.1.0".
    public var software: String

    public init(deviceId: String, name: String, folders: [String], lastBackupAt: String?, files: Int64, bytes: Int64,
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

    public func encoded() -> [UInt8] {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        return Array((try? e.encode(self)) ?? Data())
    }

    public static func decode(_ bytes: [UInt8]) -> DeviceRecord? {
        try? JSONDecoder().decode(DeviceRecord.self, from: Data(bytes))
    }
}
