import Foundation
import Vault

/// `device.json`: what `photolalactl devices` shows of a NAS without replaying its
/// manifest. Rewritten after every manifest segment; the segments stay the truth. In
/// format 2 it is sealed like the segments and also names the chain's head, with a
/// counter that grows with every write (privacy.md "Freshness").
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
    /// Format 2: grows by one with every write of the record.
    package var counter: Int64?
    /// Format 2: the newest log segment, and the SHA-256 of its sealed bytes.
    package var head: ManifestHead?
    /// The newest record counter and segment this NAS has seen of each other device of the
    /// account, by device id (privacy.md "Freshness without memory"): a fresh NAS holds a
    /// device's manifest against the newest any surviving record vouches for.
    package var seen: [String: SeenHead]?

    package init(deviceId: String, name: String, folders: [String], lastBackupAt: String?, files: Int64, bytes: Int64,
                logSeq: Int64, snapshotSeq: Int64, updatedAt: String, software: String, counter: Int64? = nil, head: ManifestHead? = nil,
                seen: [String: SeenHead]? = nil) {
        format = head == nil ? 1 : 2
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
        self.counter = counter
        self.head = head
        self.seen = seen
    }

    /// Format 1's plaintext JSON, indented as earlier releases wrote it.
    package func encoded() -> [UInt8] {
        encoded(formatting: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
    }

    private func encoded(formatting: JSONEncoder.OutputFormatting) -> [UInt8] {
        let e = JSONEncoder()
        e.outputFormatting = formatting
        return Array((try? e.encode(self)) ?? Data())
    }

    /// A format-1 record (plaintext JSON).
    package static func decode(_ bytes: [UInt8]) -> DeviceRecord? {
        try? JSONDecoder().decode(DeviceRecord.self, from: Data(bytes))
    }

    /// The sealed record, for `objectKey` (the device's `device.json`): JSON without
    /// indentation, deflated (`SealedJSON`), sealed; from this release with the account key
    /// wrapped under the recovery key before the seal (`SealedRecord`, `PLMANIF` 0x03).
    package func sealed(key: AccountKey, wrap: SealedRecord.Wrap?, userId: String, objectKey: String) -> [UInt8] {
        SealedRecord.seal(sealedPlaintext(), key: key, wrap: wrap, userId: userId, objectKey: objectKey)
    }

    /// As the first format-2 releases sealed it (`PLMANIF` 0x02, no wrap): for the tests of
    /// what this release does with an older NAS's record.
    package func sealed(key: MetadataKey, objectKey: String) -> [UInt8] {
        SealedObject.seal(sealedPlaintext(), key: key, objectKey: objectKey)
    }

    package func sealedPlaintext() -> [UInt8] {
        SealedJSON.pack(encoded(formatting: [.sortedKeys, .withoutEscapingSlashes]))
    }

    /// A format-2 record, if it opens as `objectKey` and says it is format 2 with a head.
    package static func open(_ bytes: [UInt8], key: MetadataKey, objectKey: String) throws(ManifestFormatError) -> DeviceRecord {
        let plaintext: [UInt8]
        do {
            plaintext = try SealedObject.open(bytes, key: key, objectKey: objectKey)
        } catch {
            throw .sealed(error.description)
        }
        guard let json = SealedJSON.unpack(plaintext), let record = decode(json), record.format == 2, record.head != nil, record.counter != nil else {
            throw .badHeader("it is not a format-2 device record")
        }
        return record
    }

    /// Which format a `device.json` (or any manifest object) is in, from its first bytes
    /// alone: 2 sealed, 1 plaintext (JSON or a format-1 segment); nil for anything else.
    package static func format(of bytes: [UInt8]) -> Int? {
        // 0x03 is format 2's device record with the wrapped account key.
        if bytes.count >= 8 && bytes.starts(with: SealedRecord.magic) { return 2 }
        if bytes.count >= 8 && bytes.starts(with: SealedObject.magic.prefix(7)) { return Int(bytes[7]) }
        if bytes.first == UInt8(ascii: "{") { return 1 }
        return nil
    }
}

/// The head of a device's manifest chain: its newest log segment and the SHA-256 of that
/// segment's sealed bytes (for a device whose newest object is a snapshot: the log segment
/// the snapshot covers last, as its index names it).
package struct ManifestHead: Codable, Sendable, Equatable {
    package var seq: Int64
    package var sha256: String

    package init(seq: Int64, sha256: String) {
        self.seq = seq
        self.sha256 = sha256
    }
}

/// What a device record vouches for of another device: the newest record counter and log
/// segment its NAS saw (read or written), and when.
package struct SeenHead: Codable, Sendable, Equatable {
    package var counter: Int64
    package var seq: Int64

    package init(counter: Int64, seq: Int64) {
        self.counter = counter
        self.seq = seq
    }
}

/// What a NAS remembers of a device's manifest: the newest record counter and head it
/// wrote or read, so an older one coming back (a rollback) is refused.
package struct RememberedHead: Codable, Sendable, Equatable {
    package var counter: Int64
    package var head: ManifestHead

    package init(counter: Int64, head: ManifestHead) {
        self.counter = counter
        self.head = head
    }
}

/// Where the reader keeps the heads it has seen (the queue database, in the daemon).
package protocol ManifestHeadMemory: Sendable {
    func remembered(userId: String, device: String) async -> RememberedHead?
    /// Keeps `head` unless a newer one is already kept.
    func remember(userId: String, device: String, _ head: RememberedHead) async
    /// Every device of the account remembered, by id.
    func all(userId: String) async -> [String: RememberedHead]
}

extension ManifestHeadMemory {
    package func all(userId: String) async -> [String: RememberedHead] { [:] }
}
