/// Where a device's manifest lives in the bucket (s3-layout.md, docs/manifest.md):
///
///     metadata/{userId}/devices/{deviceId}/device.json                   the device's record
///     metadata/{userId}/devices/{deviceId}/log/{seq:012}.pls             log segments 1, 2, …
///     metadata/{userId}/devices/{deviceId}/snapshot/{seq:012}/{part:06}.pls   a snapshot's parts
///     metadata/{userId}/devices/{deviceId}/snapshot/{seq:012}/index.pls  written last: the snapshot is complete
///
/// Format 2 (sealed) objects end in `.pls`; the plaintext format 1 ended in `.plm`, so the
/// two never share a key while a NAS upgrades (`plaintext` is that layout).
package struct ManifestKeys: Sendable, Equatable {
    package let userId: String
    package let deviceId: String
    /// `pls` (format 2) or `plm` (format 1).
    package let segmentExtension: String

    package init(userId: String, deviceId: String) {
        self.userId = userId
        self.deviceId = deviceId
        segmentExtension = "pls"
    }

    private init(userId: String, deviceId: String, segmentExtension: String) {
        self.userId = userId
        self.deviceId = deviceId
        self.segmentExtension = segmentExtension
    }

    /// The same device's keys in the plaintext format 1.
    package var plaintext: ManifestKeys { ManifestKeys(userId: userId, deviceId: deviceId, segmentExtension: "plm") }
    package var isPlaintext: Bool { segmentExtension == "plm" }

    /// `metadata/{userId}/`: what the client may touch.
    package static func userPrefix(_ userId: String) -> String { "metadata/\(userId)/" }

    /// Every device of the account.
    package static func devicesPrefix(_ userId: String) -> String { "metadata/\(userId)/devices/" }

    package var prefix: String { Self.devicesPrefix(userId) + deviceId + "/" }
    package var record: String { prefix + "device.json" }

    package func log(_ seq: Int64) -> String { prefix + "log/" + Self.padded(seq, 12) + "." + segmentExtension }
    package func snapshotPart(_ seq: Int64, part: Int) -> String {
        prefix + "snapshot/" + Self.padded(seq, 12) + "/" + Self.padded(Int64(part), 6) + "." + segmentExtension
    }
    package func snapshotIndex(_ seq: Int64) -> String { prefix + "snapshot/" + Self.padded(seq, 12) + "/index." + segmentExtension }

    /// Whether `key` is a segment of the plaintext format 1 (what an upgrade deletes).
    package static func isPlaintextSegment(_ key: String) -> Bool { key.hasSuffix(".plm") }

    static func padded(_ n: Int64, _ width: Int) -> String {
        let digits = String(n)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// The device id in a key under `devicesPrefix`, and whether the key is its record.
    package static func deviceOf(key: String, userId: String) -> (device: String, isRecord: Bool)? {
        let prefix = devicesPrefix(userId)
        guard key.utf8.starts(with: prefix.utf8) else { return nil }
        let rest = key.utf8.dropFirst(prefix.utf8.count)
        guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let device = String(Substring(rest[..<slash]))
        let tail = String(Substring(rest[rest.index(after: slash)...]))
        return device.isEmpty ? nil : (device, tail == "device.json")
    }
}

/// Which objects of a listing make up the manifest a reader should replay: the newest
/// snapshot that has its index, then the log segments after it, one by one with no gap.
/// Everything else (logs a snapshot covers, older snapshots, a snapshot whose index never
/// came) is left over from compaction and may be deleted.
package struct ManifestChain: Sendable, Equatable {
    /// The newest complete snapshot's sequence number (its index is there), if any.
    package var snapshot: Int64?
    /// Log segments to replay after the snapshot, in order.
    package var logs: [Int64]
    /// The first log segment missing after the snapshot when later ones exist: a reader
    /// stops before it (what comes after could not be replayed in order).
    package var gapAt: Int64?
    /// Keys no reader needs once the complete snapshot is there: the logs it covers,
    /// older snapshots, unfinished snapshots older than it.
    package var stale: [String]
    /// Log segments listed after a gap: no reader can replay them until a snapshot covers them.
    package var beyondGap: [Int64]
    /// Every log number listed, covered or not.
    package var listedLogs: [Int64]
    /// The snapshot directories listed, with or without an index.
    package var listedSnapshots: [Int64: Bool]

    /// The last log segment the chain reaches (its snapshot's when no log follows; 0 when empty).
    package var lastSeq: Int64 { logs.last ?? snapshot ?? 0 }

    package init(keys: [String], layout: ManifestKeys) {
        var logKeys: [Int64: String] = [:]
        var snapshotKeys: [Int64: [String]] = [:]
        var indexed: Set<Int64> = []
        let prefix = layout.prefix
        let ext = "." + layout.segmentExtension
        // The other format's objects are not part of this chain (an upgrade deletes them).
        for key in keys where key.utf8.starts(with: prefix.utf8) && key.hasSuffix(ext) {
            let rest = String(Substring(key.utf8.dropFirst(prefix.utf8.count)))
            let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
            if parts.count == 2, parts[0] == "log", let n = Int64(parts[1].dropLast(4)), n > 0 {
                logKeys[n] = key
            } else if parts.count == 3, parts[0] == "snapshot", let n = Int64(parts[1]), n > 0 {
                snapshotKeys[n, default: []].append(key)
                if parts[2] == "index" + ext { indexed.insert(n) }
            }
        }
        let complete = indexed.max()
        snapshot = complete
        var chain: [Int64] = []
        var next = (complete ?? 0) + 1
        while logKeys[next] != nil {
            chain.append(next)
            next += 1
        }
        logs = chain
        let beyond = logKeys.keys.filter { $0 > next }.sorted()
        gapAt = beyond.isEmpty ? nil : next
        beyondGap = beyond
        var stale: [String] = []
        for (n, key) in logKeys where n <= (complete ?? 0) { stale.append(key) }
        for (n, keys) in snapshotKeys where n != complete {
            // An unfinished snapshot newer than the complete one may still be being written.
            if !indexed.contains(n) && n > (complete ?? 0) { continue }
            stale.append(contentsOf: keys)
        }
        self.stale = stale.sorted()
        listedLogs = logKeys.keys.sorted()
        listedSnapshots = Dictionary(uniqueKeysWithValues: snapshotKeys.keys.map { ($0, indexed.contains($0)) })
    }
}
