import Foundation

/// Where a manifest's objects are read from: a listing and the objects' bytes, nothing
/// else. The manifest stage and restore each answer it from their bucket; the reading and
/// every check stay here, with the format.
package protocol ManifestObjects: Sendable {
    /// One page of the keys under `prefix` from `token` (nil: the first), and the token of
    /// the next page (nil: that was the last).
    func keys(under prefix: String, from token: String?) async throws -> (keys: [String], next: String?)
    /// The object's bytes, nil when there is no such key.
    func bytes(_ key: String) async throws -> [UInt8]?
}

extension ManifestObjects {
    /// Every key under `prefix`, page after page.
    package func keys(under prefix: String) async throws -> [String] {
        var keys: [String] = []
        var token: String?
        repeat {
            let page = try await self.keys(under: prefix, from: token)
            keys += page.keys
            token = page.next
        } while token != nil
        return keys
    }

    /// A segment, read and checked; `digest` (hex) must match when given (a snapshot part
    /// against its index).
    package func segment(_ key: String, digest: String? = nil) async throws -> (segment: ManifestSegment, bytes: [UInt8]) {
        guard let bytes = try await bytes(key) else { throw ManifestReadError.missing(key) }
        if let digest, ManifestSegment.digestHex(of: bytes) != digest { throw ManifestReadError.damaged(key, "it is not the part its index names") }
        do {
            return (try ManifestSegment.decode(bytes), bytes)
        } catch {
            throw ManifestReadError.damaged(key, error.description)
        }
    }
}

/// Why a manifest could not be read as the listing promised.
package enum ManifestReadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Listed but gone when fetched: compacted away meanwhile; read again.
    case missing(String)
    case damaged(String, String)

    package var description: String {
        switch self {
        case .missing(let key): "\(key) went away while it was being read (the manifest was being compacted); read it again"
        case let .damaged(key, why): "\(key) cannot be trusted: \(why)"
        }
    }
}

/// Reads a device's manifest from the bucket in replay order — the newest complete
/// snapshot's parts, each checked against its index, then the log segments after it —
/// and hands over every segment checked, with its bytes. What it cannot use it reports.
package struct ManifestReader: Sendable {
    package struct Report: Codable, Sendable, Equatable {
        package var segments: Int = 0
        package var entries: Int = 0
        /// The last log segment replayed (0: none).
        package var lastSeq: Int64 = 0
        /// Everything the reader could not use, in words; empty when the manifest was read whole.
        package var problems: [String] = []
        /// Read to its end.
        package var complete = true
        /// An object went away while it was read (compaction): read again.
        package var retry = false
        package init() {}
    }

    package let store: any ManifestObjects
    package let keys: ManifestKeys

    package init(store: any ManifestObjects, keys: ManifestKeys) {
        self.store = store
        self.keys = keys
    }

    package func read(_ each: (ManifestSegment, [UInt8]) async throws -> Void) async throws -> Report {
        var report = Report()
        let chain = ManifestChain(keys: try await store.keys(under: keys.prefix), layout: keys)
        func deliver(_ segment: ManifestSegment, _ bytes: [UInt8]) async throws {
            try await each(segment, bytes)
            report.segments += 1
            report.entries += segment.entries.count
        }
        do {
            if let seq = chain.snapshot {
                let (index, indexBytes) = try await store.segment(keys.snapshotIndex(seq))
                guard index.header.kind == .snapshotIndex, index.header.seq == seq, let parts = index.header.parts else {
                    throw ManifestReadError.damaged(keys.snapshotIndex(seq), "it is not the index of snapshot \(seq)")
                }
                try await each(index, indexBytes)
                for part in parts {
                    let key = keys.snapshotPart(seq, part: part.part)
                    let (segment, bytes) = try await store.segment(key, digest: part.sha256)
                    guard segment.header.kind == .snapshot, segment.header.seq == seq else {
                        throw ManifestReadError.damaged(key, "it is not a part of snapshot \(seq)")
                    }
                    try await deliver(segment, bytes)
                }
                report.lastSeq = seq
            }
            for seq in chain.logs {
                let key = keys.log(seq)
                let (segment, bytes) = try await store.segment(key)
                guard segment.header.kind == .log, segment.header.seq == seq else {
                    throw ManifestReadError.damaged(key, "it is not log segment \(seq)")
                }
                try await deliver(segment, bytes)
                report.lastSeq = seq
            }
            if let gap = chain.gapAt {
                report.problems.append("log segment \(gap) of the manifest is missing: it was read up to segment \(gap - 1), later changes are not in this restore")
                report.complete = false
            }
        } catch ManifestReadError.missing(let key) {
            report.problems.append("\(key) went away while it was read (the manifest was being compacted)")
            report.complete = false
            report.retry = true
        } catch let ManifestReadError.damaged(key, why) {
            report.problems.append("\(key) cannot be trusted (\(why)): the manifest was read up to segment \(report.lastSeq), later changes are not in this restore")
            report.complete = false
        }
        return report
    }
}
