import Foundation

/// A name the status shows inside a sentence (a problem line) and the folder it is an
/// entry of: a member of the socket group who could not list that folder is not shown it
/// (privacy.md "No side doors"). Parts that put names in `problems` say which here.
package struct StatusName: Sendable, Equatable {
    /// The text as it appears in the sentence (a path, or a file name).
    package var text: String
    /// The folder it is an entry of.
    package var folder: String

    package init(text: String, folder: String) {
        self.text = text
        self.folder = folder
    }

    /// A path: its name is an entry of the folder above it.
    package init(path: String) {
        self.init(text: path, folder: PathAccess.parent(of: path))
    }
}

/// A value the daemon keeps with another for its own use and never puts on the wire: the
/// JSON of the struct holding it has no key for it (see the container extensions below).
@propertyWrapper
package struct Unencoded<Value: Sendable & Equatable & ExpressibleByArrayLiteral>: Sendable, Equatable, Codable {
    package var wrappedValue: Value

    package init(wrappedValue: Value) {
        self.wrappedValue = wrappedValue
    }

    package init(from decoder: any Decoder) throws {
        wrappedValue = []
    }

    package func encode(to encoder: any Encoder) throws {}
}

extension KeyedEncodingContainer {
    /// No key at all for an `Unencoded` value.
    package mutating func encode<V>(_ value: Unencoded<V>, forKey key: Key) throws {}
}

extension KeyedDecodingContainer {
    package func decode<V>(_ type: Unencoded<V>.Type, forKey key: Key) throws -> Unencoded<V> {
        Unencoded(wrappedValue: [])
    }
}

extension DaemonStatus {
    /// What stands in a sentence for a name its reader may not see.
    package static let hiddenName = "(a folder you cannot list)"

    /// The status as a member of the socket group sees it: watched folders, missing ones
    /// and names in problem lines only where `canList` says the member could list the
    /// folder holding them; another device's name (a restore under way from it) not at all.
    /// Root and the daemon's user see the status whole.
    package func seen(canList: (String) -> Bool, thisDevice: Set<String>) -> DaemonStatus {
        var s = self
        var visible: [String: Bool] = [:]
        func mayName(_ path: String) -> Bool {
            let folder = PathAccess.parent(of: path)
            if let known = visible[folder] { return known }
            let answer = canList(folder)
            visible[folder] = answer
            return answer
        }
        var hidden = names.filter { name in
            if let known = visible[name.folder] { return !known }
            let answer = canList(name.folder)
            visible[name.folder] = answer
            return !answer
        }.map(\.text)
        hidden += watch.paths.filter { !mayName($0) } + watch.missingFolders.filter { !mayName($0) }
        s.watch.paths = watch.paths.filter(mayName)
        s.watch.missingFolders = watch.missingFolders.filter(mayName)
        s.attention = attention.map { item in
            guard let subject = item.subject, !mayName(subject) else { return item }
            var shown = item
            shown.subject = nil
            shown.message = item.reason == .folderMissing
                ? "A watched folder is missing or unreadable: nothing in it is backed up."
                : Self.without(hidden + [subject], in: item.message)
            return shown
        }
        s.problems = problems.map { Self.without(hidden, in: $0) }
        if let restore, !thisDevice.contains(restore.device) { s.restore?.device = "another device" }
        s.names = []
        return s
    }

    /// `text` with every occurrence of `hidden` names replaced, the longest first (a path
    /// that contains another is replaced whole).
    static func without(_ hidden: [String], in text: String) -> String {
        var out = text
        for name in Set(hidden).sorted(by: { $0.count > $1.count }) where !name.isEmpty {
            out = out.replacingOccurrences(of: name, with: hiddenName)
        }
        return out
    }
}
