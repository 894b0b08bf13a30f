import Foundation
import PhotolalaCore

/// What the catalog stage remembers across restarts, in the queue's `setting` table:
/// whose catalog the bookkeeping in `photo.catalog` belongs to, the pointer as last seen
/// (so an unchanged catalog costs one small GET), what status shows, and a snapshot
/// upload in parts that a crash may have left open.
package struct CatalogLedger: Sendable, Equatable {
    package static let prefix = "catalog."

    var userId: String?
    package var pointer: SeenPointer?
    package var rows = 0
    var total = 0
    package var publishedAt: Date?
    var checkedAt: Date?
    /// "key uploadId" of a snapshot upload in parts under way.
    var openUpload: String?
    /// A sync's recording was cut short (a kill between its transactions): the queue's
    /// marks may be ahead of the rest of this ledger, so the catalog is read again at once.
    var unsettled = false

    package init() {}

    package init(settings: [String: String]) {
        func value(_ name: String) -> String? { settings[Self.prefix + name] }
        userId = value("userId")
        if let etag = value("pointerETag"), let md5 = value("pointerMD5") { pointer = SeenPointer(etag: etag, md5: md5) }
        rows = value("rows").flatMap { Int($0) } ?? 0
        total = value("total").flatMap { Int($0) } ?? 0
        publishedAt = value("publishedAt").flatMap(Timestamp.parse)
        checkedAt = value("checkedAt").flatMap(Timestamp.parse)
        openUpload = value("openUpload")
        unsettled = value("recording") != nil
    }

    /// Written before the marks of a sync, removed with the ledger written after them.
    package static let recordingKey = prefix + "recording"

    /// Every key, nil for those without a value (removed).
    var settings: [String: String?] {
        [
            Self.prefix + "userId": userId,
            Self.prefix + "pointerETag": pointer?.etag,
            Self.prefix + "pointerMD5": pointer?.md5,
            Self.prefix + "rows": String(rows),
            Self.prefix + "total": String(total),
            Self.prefix + "publishedAt": publishedAt.map(Timestamp.string),
            Self.prefix + "checkedAt": checkedAt.map(Timestamp.string),
            Self.prefix + "openUpload": openUpload,
            Self.recordingKey: unsettled ? "1" : nil,
        ]
    }

    /// After a sync that read the catalog (and published, if `published`).
    mutating func note(_ report: SyncReport, at now: Date, published: Bool) {
        pointer = report.pointer
        rows = report.rows
        total = report.total
        checkedAt = now
        if published { publishedAt = now }
        unsettled = false
    }

    /// Signed in as someone else: nothing is known of their catalog.
    mutating func forget(newUser: String) {
        self = CatalogLedger()
        userId = newUser
    }
}
