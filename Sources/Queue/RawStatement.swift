import GRDB
import GRDBSQLite

/// One of GRDB's cached statements driven through the SQLite C API (which GRDB documents
/// `sqliteStatement` for), for the few statements a scan runs once per file. GRDB's
/// `execute(arguments:)` boxes every argument and checks every step for its observers;
/// with a hundred thousand files that cost as much as SQLite's own work. Only for plain
/// reads and writes inside a transaction GRDB opened (`read`/`write`): nothing here
/// begins or ends one.
package struct RawStatement {
    private let statement: Statement
    private var handle: OpaquePointer { statement.sqliteStatement }

    package init(_ db: Database, _ sql: String) throws {
        statement = try db.cachedStatement(sql: sql)
    }

    /// Binds `values` to ?1, ?2, … and steps once: true when a row is there to read with
    /// the column accessors, false when the statement is done. Call `reset()` after.
    package func step(_ values: RawValue...) throws -> Bool {
        sqlite3_reset(handle)
        for (i, value) in values.enumerated() {
            let index = Int32(i + 1)
            switch value {
            case .int(let v): sqlite3_bind_int64(handle, index, v)
            case .double(let v): sqlite3_bind_double(handle, index, v)
            case .text(let v): sqlite3_bind_text(handle, index, v, -1, Self.transient)
            case .blob(let v): v.withUnsafeBytes { _ = sqlite3_bind_blob(handle, index, $0.baseAddress, Int32($0.count), Self.transient) }
            case .null: sqlite3_bind_null(handle, index)
            }
        }
        return try next()
    }

    /// The next row of a statement already stepped.
    package func next() throws -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            // sqlite3_reset returns the (extended) code of the failed step.
            let code = sqlite3_reset(handle)
            let message = sqlite3_db_handle(handle).flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
        }
    }

    /// Ends the current execution (a read's row, a write's statement) and lets go of
    /// bound strings.
    package func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    package func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    package func text(_ column: Int32) -> String? {
        guard let p = sqlite3_column_text(handle, column) else { return nil }
        return String(cString: p)
    }

    /// A blob column's bytes; nil for NULL.
    package func blob(_ column: Int32) -> [UInt8]? {
        guard sqlite3_column_type(handle, column) != SQLITE_NULL else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let p = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: count))
    }

    package func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    /// Rows this write changed (SQLite counts them per connection).
    package var changes: Int32 { sqlite3_db_handle(handle).map { sqlite3_changes($0) } ?? 0 }

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}

package enum RawValue {
    case int(Int64)
    case double(Double)
    case text(String)
    case blob([UInt8])
    case null
}
