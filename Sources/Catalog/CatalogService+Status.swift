import PhotolalaCore

/// The catalog's part of the status (cli.md `catalog`).
extension CatalogService {
    package func contribute(to s: inout DaemonStatus) {
        s.catalog = DaemonStatus.Catalog(
            state: state, rows: ledger.rows, publishedAt: ledger.publishedAt.map(Timestamp.string), lastError: lastError,
            pending: pending, total: ledger.total, checkedAt: ledger.checkedAt.map(Timestamp.string),
            conditionalWrites: conditionalWrites)
    }

    /// Off overrides everything; a catalog that cannot be read comes next, since new rows
    /// wait on it; then what the rows are doing.
    var state: DaemonStatus.Catalog.State {
        if !options.enabled { return .off }
        if blockedReason != nil { return .blocked }
        if syncing && pending > 0 { return .publishing }
        if pending > 0 { return .pending }
        return ledger.rows > 0 ? .published : .idle
    }
}
