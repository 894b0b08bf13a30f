/// What a listing page means for an object the queue holds. Pure, so it is tested with
/// plain values; the queue applies it to each page in the page's transaction.
package enum ListingReconciliation {
    /// An object waiting to be sent (or given up on) whose key is listed with its size is
    /// already backed up: it is marked uploaded and nothing is sent. Not one `verify`
    /// found wrong in the bucket (`overwrite`): the listed object is the problem. Not one
    /// being sent right now: its worker records the outcome.
    package static func isBackedUp(state: ObjectState, size: Int64, overwrite: Bool, listedSize: Int64) -> Bool {
        (state == .pending || state == .failed) && !overwrite && size == listedSize
    }

    /// The MD5 a photo key names (`photos/U/{md5}.dat` under `prefix`), or nil for any
    /// other key (another tool's files under the same prefix are listed but match no object).
    package static func md5(ofKey key: String, prefix: String) -> String? {
        guard key.utf8.starts(with: prefix.utf8) else { return nil }
        let name = key.utf8.dropFirst(prefix.utf8.count)
        guard name.count == 36, name.suffix(4).elementsEqual(".dat".utf8) else { return nil }
        let hex = name.prefix(32)
        guard hex.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else { return nil }
        return String(decoding: hex, as: UTF8.self)
    }
}
