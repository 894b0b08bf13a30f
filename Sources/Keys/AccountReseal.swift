import Digests
import Foundation
import ManifestFormat
import Vault

/// Where a re-seal reads and writes: the account's metadata, nothing else.
package protocol ResealStore: Sendable {
    /// Every key under `prefix`.
    func keys(under prefix: String) async throws -> [String]
    func bytes(_ key: String) async throws -> [UInt8]?
    func put(_ key: String, _ bytes: [UInt8]) async throws
}

/// `recovery-key --rotate --new-account-key` (privacy.md "No side doors"): every object
/// under `metadata/{userId}/devices/` of every device sealed again under the new account
/// key, the chain of each device linked again over the new sealed bytes, each device
/// record given the new head and the new key wrapped under the new recovery key.
///
/// Resumable and idempotent: an object that opens under the new key and links where it
/// should is left as it is, so a run killed at any PUT and run again writes only what is
/// left. An object sealed again names the SHA-256 of its old sealed bytes in its header
/// (`resealedFrom`), so the next segment, still old, is known to have followed it. A link
/// that did not hold before (a gap, a replaced segment) is not mended: the re-seal keeps
/// the header as it was, and readers still see the break.
package struct AccountReseal: Sendable {
    let userId: String
    let old: AccountKey
    let new: AccountKey
    /// The new recovery key, wrapped into every device record.
    let wrap: SealedRecord.Wrap

    struct Report: Sendable, Equatable {
        /// Objects written under the new key in this run.
        var sealed = 0
        /// Objects that already were (a run before this one).
        var already = 0
        var devices = 0
        /// Objects that opened under neither key: left as they are (named).
        var unreadable: [String] = []
    }

    /// One object as found: its bytes, which key opened it, its plaintext.
    private struct Found {
        var sealed: [UInt8]
        var plaintext: [UInt8]
        var underNew: Bool
        var sha: String { SHA256.hexDigest(sealed) }
        /// The SHA-256 of the bytes before a re-seal (its own header says), else its own.
        var formerSHA: String? {
            guard underNew, let h = ManifestPlaintext.header(of: plaintext)?.header else { return nil }
            return h["resealedFrom"] as? String
        }
    }

    func run(_ store: any ResealStore, progress: @Sendable (Report) async -> Void = { _ in }) async throws -> Report {
        var report = Report()
        let all = try await store.keys(under: ManifestKeys.devicesPrefix(userId))
        var devices: [String: [String]] = [:]
        for key in all {
            guard let (device, _) = ManifestKeys.deviceOf(key: key, userId: userId) else { continue }
            devices[device, default: []].append(key)
        }
        for (device, keys) in devices.sorted(by: { $0.key < $1.key }) {
            try await reseal(device: device, keys: keys, store, &report)
            report.devices += 1
            await progress(report)
        }
        return report
    }

    /// At most three runs. Another NAS may have sealed a segment under the old key while this
    /// one went by (it stops at its next write, once it sees the new key object): a run that
    /// finds nothing left to seal ends it.
    func runUntilSettled(_ store: any ResealStore, progress: @Sendable (Report) async -> Void) async throws -> Report {
        var total = Report()
        for _ in 0..<3 {
            let report = try await run(store, progress: progress)
            total.sealed += report.sealed
            total.devices = report.devices
            total.unreadable = report.unreadable
            if report.sealed == 0 { break }
        }
        return total
    }

    private func open(_ key: String, _ store: any ResealStore) async throws -> Found? {
        guard let bytes = try await store.bytes(key) else { return nil }
        if let plain = try? SealedObject.open(bytes, key: new.metadataKey, objectKey: key) {
            return Found(sealed: bytes, plaintext: plain, underNew: true)
        }
        if let plain = try? SealedObject.open(bytes, key: old.metadataKey, objectKey: key) {
            return Found(sealed: bytes, plaintext: plain, underNew: false)
        }
        return nil
    }

    /// Writes `plaintext` sealed under the new key at `key` (recording `from`, the SHA-256
    /// of the old sealed bytes, when the header changes): the new sealed bytes' SHA-256.
    private func seal(_ key: String, header: [String: Any], records: ArraySlice<UInt8>, _ store: any ResealStore,
                      _ report: inout Report) async throws -> String? {
        guard let plaintext = ManifestPlaintext.segment(header: header, records: records) else { return nil }
        let sealed = SealedObject.seal(plaintext, key: new.metadataKey, objectKey: key)
        try await store.put(key, sealed)
        report.sealed += 1
        return SHA256.hexDigest(sealed)
    }

    private func reseal(device: String, keys: [String], _ store: any ResealStore, _ report: inout Report) async throws {
        let layout = ManifestKeys(userId: userId, deviceId: device)
        let chain = ManifestChain(keys: keys, layout: layout)
        var done: Set<String> = []
        /// The sealed SHA-256 each chained object has now, and had before it was sealed again.
        var now: [Int64: String] = [:]
        var before: [Int64: String] = [:]
        var link: String?
        var snapshotLink: String?

        if let seq = chain.snapshot {
            let indexKey = layout.snapshotIndex(seq)
            if let index = try await open(indexKey, store), let (h, records) = ManifestPlaintext.header(of: index.plaintext) {
                var header = h
                var parts = (header["parts"] as? [[String: Any]]) ?? []
                var changed = !index.underNew
                for i in parts.indices {
                    guard let n = parts[i]["part"] as? Int else { continue }
                    let partKey = layout.snapshotPart(seq, part: n)
                    done.insert(partKey)
                    guard let part = try await open(partKey, store) else {
                        report.unreadable.append(partKey)
                        continue
                    }
                    var sha = part.sha
                    if !part.underNew, let (ph, pr) = ManifestPlaintext.header(of: part.plaintext) {
                        var marked = ph
                        marked["resealedFrom"] = part.sha
                        sha = try await seal(partKey, header: marked, records: pr, store, &report) ?? sha
                    } else if part.underNew {
                        report.already += 1
                    }
                    // Only a part its index named by its old bytes is named by its new ones.
                    let named = parts[i]["sha256"] as? String
                    if let named, named != sha, named == part.sha || named == part.formerSHA {
                        parts[i]["sha256"] = sha
                        changed = true
                    }
                }
                header["parts"] = parts
                if changed {
                    if !index.underNew { header["resealedFrom"] = index.sha }
                    _ = try await seal(indexKey, header: header, records: records, store, &report)
                } else {
                    report.already += 1
                }
                snapshotLink = h["prev"] as? String
            } else {
                report.unreadable.append(indexKey)
            }
            done.insert(indexKey)
            link = snapshotLink
        } else {
            link = ManifestHeader.noPrevious
        }

        for seq in chain.logs {
            let logKey = layout.log(seq)
            done.insert(logKey)
            guard let found = try await open(logKey, store), let (h, records) = ManifestPlaintext.header(of: found.plaintext) else {
                report.unreadable.append(logKey)
                link = nil
                continue
            }
            var header = h
            let prev = h["prev"] as? String
            // The link it carries held before the re-seal: to the predecessor's old bytes, or
            // (already relinked) to its new ones; the first after a snapshot keeps the index's.
            let wanted: String?
            if seq == (chain.snapshot ?? 0) + 1 {
                wanted = link
            } else if let p = now[seq - 1], prev == p {
                wanted = p
            } else if let p = now[seq - 1], let b = before[seq - 1], prev == b {
                wanted = p
            } else {
                wanted = nil   // a broken link stays broken
            }
            if let wanted, prev != wanted { header["prev"] = wanted }
            let sha: String
            if found.underNew && (wanted == nil || prev == wanted) {
                sha = found.sha
                before[seq] = found.formerSHA ?? found.sha
                report.already += 1
            } else {
                if !found.underNew { header["resealedFrom"] = found.sha }
                before[seq] = found.underNew ? (found.formerSHA ?? found.sha) : found.sha
                sha = try await seal(logKey, header: header, records: records, store, &report) ?? found.sha
            }
            now[seq] = sha
            link = sha
        }

        // Whatever else is sealed under the device: left over from compaction, or beyond a
        // gap. Nobody reads it in the chain's order; it is sealed again as it is.
        for key in keys where key.hasSuffix(".pls") && !done.contains(key) {
            guard let found = try await open(key, store) else {
                report.unreadable.append(key)
                continue
            }
            if found.underNew {
                report.already += 1
                continue
            }
            let sealed = SealedObject.seal(found.plaintext, key: new.metadataKey, objectKey: key)
            try await store.put(key, sealed)
            report.sealed += 1
        }

        // The record last: the head it names, over the new bytes, and the new key wrapped.
        let recordKey = layout.record
        guard keys.contains(recordKey) else { return }
        guard let bytes = try await store.bytes(recordKey), DeviceRecordBytes.isSealed(bytes) else { return }
        let plain: [UInt8]
        var underNew = false
        if let p = try? SealedObject.open(bytes, key: new.metadataKey, objectKey: recordKey) {
            plain = p
            underNew = true
        } else if let p = try? SealedObject.open(bytes, key: old.metadataKey, objectKey: recordKey) {
            plain = p
        } else {
            report.unreadable.append(recordKey)
            return
        }
        guard var fields = ManifestPlaintext.record(plain) else {
            report.unreadable.append(recordKey)
            return
        }
        var changed = !underNew || !SealedRecord.hasWrap(bytes)
        if var head = fields["head"] as? [String: Any], let seq = (head["seq"] as? NSNumber)?.int64Value,
           let sha = head["sha256"] as? String, let newSHA = now[seq], sha != newSHA, sha == before[seq] {
            head["sha256"] = newSHA
            fields["head"] = head
            changed = true
        }
        guard changed else {
            report.already += 1
            return
        }
        guard let plaintext = ManifestPlaintext.record(fields) else { return }
        try await store.put(recordKey, SealedRecord.seal(plaintext, key: new, wrap: wrap, userId: userId, objectKey: recordKey))
        report.sealed += 1
    }
}
