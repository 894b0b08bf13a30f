/// The merge of app-catalog.md's step 3 as a stream: the rows already in the catalog and
/// ours to add, each newest first, become one newest-first sequence. Nothing is held but
/// the next row of each side, so a million rows merge in constant memory.
///
/// Deciding which of ours to add (those whose `photo_md5` the catalog lacks) happens
/// before: this only orders. At equal dates the rows already there come first, so a
/// catalog merged again with nothing new comes out byte for byte the same.
package enum CatalogMerge {
    package enum Item<Existing, Ours> {
        case existing(Existing)
        case ours(Ours)
    }

    /// Pulls from both sides until both are empty, handing each item to `emit` in order.
    package static func merge<Existing, Ours>(
        existing nextExisting: () throws -> (date: Double?, value: Existing)?,
        ours nextOurs: () throws -> (date: Double, value: Ours)?,
        emit: (Item<Existing, Ours>) throws -> Void
    ) throws {
        var theirs = try nextExisting()
        var ours = try nextOurs()
        while true {
            switch (theirs, ours) {
            case (nil, nil):
                return
            case let (t?, o?) where CatalogLine.isNewerOrSame(t.date, than: o.date):
                try emit(.existing(t.value))
                theirs = try nextExisting()
            case let (t?, nil):
                try emit(.existing(t.value))
                theirs = try nextExisting()
            case let (_, o?):
                try emit(.ours(o.value))
                ours = try nextOurs()
            }
        }
    }
}
