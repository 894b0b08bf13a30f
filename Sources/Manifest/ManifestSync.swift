import ManifestFormat

/// What comparing the bucket's listing with the ledger decides, once per account and
/// process start, as a pure value: a mirror lost with a damaged database is rebuilt from
/// the bucket's snapshot; segments written but not recorded (a kill -9 between the PUT and
/// the commit) are taken back in order; one that cannot be used is deleted with every
/// later one and written again; objects the bucket lost are superseded by a snapshot.
/// The stage reads and writes; this says what.
struct ManifestSync: Sendable, Equatable {
    let chain: ManifestChain
    let keys: ManifestKeys
    /// Segments of the plaintext format 1 still in the bucket: an upgrade (or one a crash
    /// cut short) deletes them once the sealed manifest and record are there.
    let plaintext: [String]

    init(listing: [String], keys: ManifestKeys) {
        chain = ManifestChain(keys: listing, layout: keys)
        self.keys = keys
        plaintext = listing.filter { $0.hasPrefix(keys.prefix) && ManifestKeys.isPlaintextSegment($0) }.sorted()
    }

    /// The snapshot to rebuild the mirror from: the bucket holds more than this database
    /// knows beyond what its log can tell (the database was set aside as damaged and
    /// started over). nil when the ledger is not behind a snapshot.
    func rebuild(ledgerSeq: Int64) -> Int64? {
        guard let snapshot = chain.snapshot, snapshot > ledgerSeq else { return nil }
        return snapshot
    }

    /// The log segments to take back after `ledgerSeq`, in order and with no gap: each was
    /// written (by this database or an earlier one) but never recorded here.
    func toAdopt(after ledgerSeq: Int64) -> [Int64] {
        var out: [Int64] = []
        for seq in chain.logs where seq > ledgerSeq {
            guard seq == ledgerSeq + Int64(out.count) + 1 else { break }
            out.append(seq)
        }
        return out
    }

    /// Segment `seq` cannot be used: it was never recorded here, so never counted on. It and
    /// every later log go, and those numbers are written again from the changes waiting.
    func unusable(_ seq: Int64) -> [String] {
        chain.listedLogs.filter { $0 >= seq }.map(keys.log)
    }

    enum Outcome: Sendable, Equatable {
        /// The bucket lacks segments the ledger records: write a snapshot of the whole mirror.
        case writeSnapshot
        /// The chain reaches the ledger: delete what no reader needs (logs beyond a gap,
        /// what the newest complete snapshot supersedes).
        case tidy([String])
    }

    /// After the rebuild and the adoptions, with the ledger where they left it.
    func outcome(ledgerSeq: Int64, ledgerSnapshot: Int64) -> Outcome {
        let reach = max(chain.lastSeq, chain.snapshot ?? 0)
        if reach < ledgerSeq || (chain.gapAt.map { $0 <= ledgerSeq } ?? false) || (chain.snapshot ?? 0) < ledgerSnapshot {
            return .writeSnapshot
        }
        return .tidy(chain.beyondGap.filter { $0 > ledgerSeq }.map(keys.log) + chain.stale)
    }
}
