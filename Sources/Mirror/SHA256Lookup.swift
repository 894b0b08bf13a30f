import Foundation
import GRDB
import ManifestFormat
import Queue

/// The SHA-256 a readable manifest of the account records for an object (privacy.md "No
/// side doors": MD5 collisions are practical, so where any manifest the NAS can read
/// records the SHA-256 of an object's bytes, a copy is checked against it too).
package protocol SHA256Lookup: Sendable {
    func sha256(of md5: MD5Value) async -> SHA256Value?
}

/// What this NAS itself recorded: the SHA-256 its hasher took of a file with these bytes
/// (the same value its own manifest holds), a file gone since included.
package struct LocalSHA256Lookup: SHA256Lookup {
    let database: QueueDatabase

    package init(database: QueueDatabase) {
        self.database = database
    }

    package func sha256(of md5: MD5Value) async -> SHA256Value? {
        let bytes = try? await database.read { db in
            try Data.fetchOne(db, sql: "SELECT sha256 FROM file WHERE md5 = ? AND sha256 IS NOT NULL LIMIT 1", arguments: [md5.hex])
        }
        return bytes.flatMap { $0 }.flatMap { SHA256Value(bytes: Array($0)) }
    }
}
