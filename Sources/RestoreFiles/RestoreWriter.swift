#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Digests
import Foundation
import ManifestFormat
import Synchronization

/// Puts restored files in place (privacy.md "A restore that trusts nothing"). Only the
/// item's root is opened as named (`--to DIR`, or one of this NAS's watched folders);
/// below it no symbolic link is followed at any step (`openat2` with RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS, or a walk with O_NOFOLLOW where the kernel lacks it), so a link
/// planted in the tree cannot send a file (written as root, perhaps) anywhere else. Each
/// file goes to a hidden temporary name created exclusively (mode 0600), is checked
/// against the MD5 its object's key names, gets its owner, mode and time on the open
/// file, is synced, and only then renamed into place relative to its open folder: no
/// partial file ever sits at a final path. Folders it creates get their recorded owner
/// and mode at `finish()`, after their contents.
package struct RestoreWriter: Sendable {
    package struct Failure: Error, Equatable, CustomStringConvertible {
        package var message: String
        /// A folder on the way is not there (and was not to be created).
        package var missing = false
        /// The errno of a failed write (ENOSPC: the mirror waits for space), when one said.
        package var errno: Int32?
        package init(_ message: String, missing: Bool = false, errno: Int32? = nil) {
            self.message = message
            self.missing = missing
            self.errno = errno
        }
        package var description: String { message }
    }

    package let overwrite: Bool
    let rule: OwnerRule
    /// Recorded owners of folders, by root then by path below it (`RestorePlan.Plan`).
    let folderOwners: [String: [[UInt8]: Ownership]]
    let identities = Identities()
    package let book = Book()
    /// Walk name by name with O_NOFOLLOW even where openat2 exists (tests of the fallback).
    let walkOnly: Bool
    /// Every file's owner and mode, whatever its item records (the mirror's `owner` and
    /// `file_mode`); nil: from the item, by `rule`.
    let fileAttributes: Attributes?
    /// Every folder this writer creates and has no record for (the mirror's `owner` and
    /// `dir_mode`); nil: the writing user's, 0777 less the umask.
    let folderAttributes: Attributes?
    /// Whether a missing root is made (`--to DIR`); the mirror's never is: a folder gone
    /// is a volume not mounted, and filling the disk underneath is what it must not do.
    let createsRoot: Bool

    package init(overwrite: Bool, owners: OwnerRule.Owners = .byName, folderOwners: [String: [[UInt8]: Ownership]] = [:],
                 mayChown: Bool = geteuid() == 0) {
        self.init(overwrite: overwrite, rule: OwnerRule(owners: owners, mayChown: mayChown, umask: OwnerRule.currentUmask()),
                  folderOwners: folderOwners, walkOnly: false)
    }

    init(overwrite: Bool, rule: OwnerRule, folderOwners: [String: [[UInt8]: Ownership]], walkOnly: Bool,
         fileAttributes: Attributes? = nil, folderAttributes: Attributes? = nil, createsRoot: Bool = true) {
        self.overwrite = overwrite
        self.rule = rule
        self.folderOwners = folderOwners
        self.walkOnly = walkOnly
        self.fileAttributes = fileAttributes
        self.folderAttributes = folderAttributes
        self.createsRoot = createsRoot
    }

    /// A writer that gives every file and every folder it creates the same owner and mode
    /// (the mirror: config.md `[mirror]` `owner`, `file_mode`, `dir_mode`), never replacing a file.
    package init(files: Attributes, folders: Attributes) {
        self.init(overwrite: false, rule: OwnerRule(owners: .keep, mayChown: false, umask: 0o077), folderOwners: [:], walkOnly: false,
                  fileAttributes: files, folderAttributes: folders, createsRoot: false)
    }

    /// What a file gets before its rename: its owner (nil: stays the restoring user's; either
    /// id `UInt32.max`: that one unchanged, as `fchown` takes it) and mode.
    package struct Attributes: Sendable {
        package var owner: (uid: UInt32, gid: UInt32)?
        package var mode: UInt32

        package init(owner: (uid: UInt32, gid: UInt32)?, mode: UInt32) {
            self.owner = owner
            self.mode = mode
        }
    }

    /// The open folder an item goes into, and its file name there.
    package final class Parent: Sendable {
        package let fd: Int32
        package let name: [UInt8]
        /// The folder's path, for messages.
        package let path: String
        let root: String
        /// The folder below `root` (empty: the root itself).
        let folder: [UInt8]
        let attributes: Attributes
        let book: Book

        init(fd: Int32, name: [UInt8], path: String, root: String, folder: [UInt8], attributes: Attributes, book: Book) {
            self.fd = fd
            self.name = name
            self.path = path
            self.root = root
            self.folder = folder
            self.attributes = attributes
            self.book = book
        }
        deinit { close(fd) }
    }

    /// The folders this restore created and the ones it put files in, to set owners and
    /// modes on, and to sync, at the end.
    package final class Book: Sendable {
        package struct Folder: Hashable {
            var root: String
            package var path: [UInt8]
        }
        private let state = Mutex<(created: Set<Folder>, touched: Set<Folder>)>(([], []))
        func created(_ f: Folder) { state.withLock { _ = $0.created.insert(f) } }
        func touched(_ f: Folder) { state.withLock { _ = $0.touched.insert(f) } }
        package var all: (created: Set<Folder>, touched: Set<Folder>) { state.withLock { $0 } }
        /// Everything booked so far, forgotten here: a writer that lives on (the mirror's)
        /// finishes batch after batch.
        func take() -> (created: Set<Folder>, touched: Set<Folder>) {
            state.withLock { s in
                defer { s = ([], []) }
                return s
            }
        }
    }

    // MARK: folders

    /// Opens (creating what is missing) the folders of `item.destination` below `item.root`.
    package func parent(of item: RestoreItem) throws(Failure) -> Parent {
        let components = Self.components(item.destination)
        guard let name = components.last, components.allSatisfy(RestorePlan.isSafeName) else {
            throw Failure("the manifest names an unsafe path (an empty, '.' or '..' part): not restored")
        }
        let root = try openRoot(item.root, create: createsRoot)
        defer { close(root) }
        let folder = Self.join(components.dropLast())
        let fd = try openBelow(root, rootPath: item.root, folder: components.dropLast(), create: true)
        let attributes = fileAttributes ?? Attributes(owner: item.owner.flatMap { rule.ids($0, user: identities.user, group: identities.group) },
                                                      mode: rule.fileMode(item.owner))
        return Parent(fd: fd, name: name, path: Self.display(item.root, folder), root: item.root, folder: folder, attributes: attributes, book: book)
    }

    /// The root as the user named it (it may be reached through links: it is theirs).
    package func openRoot(_ root: String, create: Bool) throws(Failure) -> Int32 {
        if create {
            do {
                try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            } catch {
                throw Failure("cannot create \(root): \(error.localizedDescription)")
            }
        }
        let fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure("cannot open \(root): \(Self.errno())") }
        return fd
    }

    /// The folder `folder` below the open `root`, never through a link; created (and
    /// booked) where missing when `create`.
    package func openBelow(_ root: Int32, rootPath: String, folder: ArraySlice<[UInt8]>, create: Bool) throws(Failure) -> Int32 {
        if folder.isEmpty { return dup(root) }
        // Most folders exist already: one call for the whole path.
        if !walkOnly && !Self.openat2Missing.load(ordering: .relaxed) {
            let (fd, err) = Self.call(Self.join(folder)) { photolala_openat2_beneath(root, $0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
            if fd >= 0 { return fd }
            if err == ENOSYS || err == EPERM {
                Self.openat2Missing.store(true, ordering: .relaxed)
            } else if err != ENOENT || !create {
                // Name by name, to say which part is wrong.
                return try walk(root, rootPath: rootPath, folder: folder, create: false)
            }
        }
        return try walk(root, rootPath: rootPath, folder: folder, create: create)
    }

    /// Set once openat2 turned out to be missing (an old kernel, a seccomp filter).
    static let openat2Missing = Atomic<Bool>(false)

    /// One name at a time: each a safe name, opened with O_NOFOLLOW (and with openat2's
    /// rules where it exists), created where missing.
    private func walk(_ root: Int32, rootPath: String, folder: ArraySlice<[UInt8]>, create: Bool) throws(Failure) -> Int32 {
        var fd = dup(root)
        var path: [[UInt8]] = []
        for component in folder {
            path.append(component)
            guard RestorePlan.isSafeName(component) else {
                close(fd)
                throw Failure("\(Self.display(rootPath, Self.join(path))): an unsafe name: not restored")
            }
            var (next, err) = openOne(fd, component)
            if next < 0 && err == ENOENT && create {
                let record = folderOwners[rootPath]?[Self.join(path)]
                // A folder with a recorded owner stays private until it gets it, after its contents.
                let restricted = record != nil || folderAttributes != nil
                let (made, mkdirErr) = Self.call(component) { mkdirat(fd, $0, restricted ? 0o700 : 0o777) }
                if made == 0 {
                    book.created(.init(root: rootPath, path: Self.join(path)))
                    book.touched(.init(root: rootPath, path: Self.join(path.dropLast())))
                }
                (next, err) = openOne(fd, component)
                if made != 0 && mkdirErr != EEXIST { err = mkdirErr }
            }
            guard next >= 0 else {
                let what = Self.what(fd, component)
                close(fd)
                let shown = Self.display(rootPath, Self.join(path))
                if err == ENOENT && !create { throw Failure("\(shown) does not exist", missing: true) }
                throw Failure(what.map { "\(shown) is \($0) where a folder should be: not followed, not restored" }
                              ?? "cannot open or create the folder \(shown): \(String(cString: strerror(err)))", errno: err)
            }
            close(fd)
            fd = next
        }
        return fd
    }

    /// The folder `name` in `dir` and the errno of the attempt.
    private func openOne(_ dir: Int32, _ name: [UInt8]) -> (Int32, Int32) {
        if !walkOnly && !Self.openat2Missing.load(ordering: .relaxed) {
            let (fd, err) = Self.call(name) { photolala_openat2_beneath(dir, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            if fd >= 0 || (err != ENOSYS && err != EPERM) { return (fd, err) }
            Self.openat2Missing.store(true, ordering: .relaxed)
        }
        return Self.call(name) { openat(dir, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
    }

    /// What stands at `name` when it is not a folder (a link, a file…), for messages.
    private static func what(_ dir: Int32, _ name: [UInt8]) -> String? {
        var st = stat()
        guard withCString(name, { fstatat(dir, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0 else { return nil }
        switch existing(st) {
        case .link: return "a symbolic link"
        case .file: return "a file"
        case .other(let kind): return kind
        case .folder, .nothing: return nil
        }
    }

    // MARK: files

    /// What stands at the name now: looked at, never followed nor opened.
    package func existing(in parent: Parent) -> ConflictRule.Existing {
        var st = stat()
        let r = Self.withCString(parent.name) { fstatat(parent.fd, $0, &st, AT_SYMLINK_NOFOLLOW) }
        return r == 0 ? Self.existing(st) : .nothing
    }

    static func existing(_ st: stat) -> ConflictRule.Existing {
        switch st.st_mode & S_IFMT {
        case S_IFREG: .file(size: Int64(st.st_size))
        case S_IFDIR: .folder
        case S_IFLNK: .link
        case S_IFIFO: .other("a named pipe (FIFO)")
        case S_IFSOCK: .other("a socket")
        case S_IFCHR, S_IFBLK: .other("a device")
        default: .other("something that is not a regular file")
        }
    }

    /// Whether the file at the name holds exactly these bytes (a FIFO or device swapped in
    /// since it was looked at is not waited on: opened non-blocking, then checked).
    package func holds(_ version: FileVersion, in parent: Parent) -> Bool {
        let fd = Self.withCString(parent.name) { openat(parent.fd, $0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return Self.holds(fd, version)
    }

    static func holds(_ fd: Int32, _ version: FileVersion) -> Bool {
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, Int64(st.st_size) == version.size else { return false }
        var md5 = MD5()
        var sha = SHA256()
        let takesSHA = version.sha256 != nil
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var total: Int64 = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && Glibc.errno == EINTR { continue }
            guard n >= 0 else { return false }
            if n == 0 { break }
            total += Int64(n)
            buffer.withUnsafeBytes {
                md5.update(UnsafeRawBufferPointer(rebasing: $0[0..<n]))
                if takesSHA { sha.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            }
        }
        guard total == version.size && MD5Value(bytes: md5.finalize()) == version.md5 else { return false }
        guard let expected = version.sha256 else { return true }
        return SHA256Value(bytes: sha.finalize()) == expected
    }

    /// A hidden temporary file next to the destination, for its bytes: created new
    /// (O_EXCL, O_NOFOLLOW), mode 0600 until it is complete; readable, for `OpenFileLanes`.
    /// `temporaryName`: the mirror's own (named by the object, so a restart reuses it).
    package func incoming(in parent: Parent, sha256: Bool = false, temporaryName: [UInt8]? = nil,
                          direct: DirectBuffers? = nil) throws(Failure) -> IncomingFile {
        let temp = temporaryName ?? Self.temporaryName(for: parent.name)
        let flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC
        var fd = Self.withCString(temp) { openat(parent.fd, $0, flags, 0o600) }
        if fd < 0 && Glibc.errno == EEXIST {
            // Left by a run that was killed (or anything planted at the name): removed, not followed.
            _ = Self.withCString(temp) { unlinkat(parent.fd, $0, 0) }
            fd = Self.withCString(temp) { openat(parent.fd, $0, flags, 0o600) }
        }
        guard fd >= 0 else {
            let code = Glibc.errno
            throw Failure("cannot create a temporary file in \(parent.path): \(Self.errno())", errno: code)
        }
        return IncomingFile(parent: parent, temp: temp, fd: fd, sha256: sha256, direct: direct)
    }

    /// `.plrestore-<16 hex of the name's SHA-256>.tmp`: hidden (the watcher skips it), short
    /// whatever the name's length, the same on every run (a re-run replaces it).
    package static func temporaryName(for name: [UInt8]) -> [UInt8] {
        Array(".plrestore-".utf8) + Array(Hex.string(Array(SHA256.digest(name).prefix(8))).utf8) + Array(".tmp".utf8)
    }

    // MARK: the end

    /// After every file: gives the folders this restore created their recorded owner and
    /// mode (deepest first, as tar does, so a read-only folder could be filled), and syncs
    /// every folder whose entries changed so the renames survive a power cut. Returns what
    /// could not be done, as sentences.
    package func finish() -> [String] {
        let (created, touched) = book.take()
        var problems: [String] = []
        var roots: [String: Int32] = [:]
        defer { for fd in roots.values { close(fd) } }
        for folder in created.union(touched).sorted(by: { Self.components($0.path).count > Self.components($1.path).count }) {
            if roots[folder.root] == nil {
                guard let fd = try? openRoot(folder.root, create: false) else { continue }
                roots[folder.root] = fd
            }
            let parts = folder.path.isEmpty ? [] : Self.components(folder.path)
            guard let fd = try? openBelow(roots[folder.root]!, rootPath: folder.root, folder: parts[...], create: false) else { continue }
            defer { close(fd) }
            if created.contains(folder), let record = folderOwners[folder.root]?[folder.path] {
                let shown = Self.display(folder.root, folder.path)
                if let ids = rule.ids(record, user: identities.user, group: identities.group), fchown(fd, ids.uid, ids.gid) != 0 {
                    problems.append("\(shown): cannot give it to \(ids.uid):\(ids.gid): \(Self.errno())")
                }
                if fchmod(fd, mode_t(rule.folderMode(record))) != 0 {
                    problems.append("\(shown): cannot set its mode: \(Self.errno())")
                }
            } else if created.contains(folder), let given = folderAttributes {
                let shown = Self.display(folder.root, folder.path)
                if let ids = given.owner, fchown(fd, ids.uid, ids.gid) != 0 {
                    problems.append("\(shown): cannot give it to \(Self.ids(ids)): \(Self.errno())")
                }
                if fchmod(fd, mode_t(given.mode)) != 0 {
                    problems.append("\(shown): cannot set its mode: \(Self.errno())")
                }
            }
            fsync(fd)
        }
        return problems
    }

    // MARK: helpers

    static func components(_ path: [UInt8]) -> [[UInt8]] {
        path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map(Array.init)
    }

    static func join<C: Collection>(_ parts: C) -> [UInt8] where C.Element == [UInt8] {
        Array(parts.joined(separator: [UInt8(ascii: "/")]))
    }

    static func display(_ root: String, _ folder: [UInt8]) -> String {
        RestorePlan.shown(folder.isEmpty ? root : (root == "/" ? "" : root) + "/" + String(decoding: folder, as: UTF8.self))
    }

    static func withCString<T>(_ bytes: [UInt8], _ body: (UnsafePointer<CChar>) -> T) -> T {
        (bytes + [0]).withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }

    /// A call on a name, with the errno it left (read before anything else can change it).
    static func call(_ name: [UInt8], _ body: (UnsafePointer<CChar>) -> Int32) -> (Int32, Int32) {
        withCString(name) { p in
            let r = body(p)
            return (r, Glibc.errno)
        }
    }

    static func errno() -> String { String(cString: strerror(Glibc.errno)) }

    /// `uid:gid` as `fchown` takes them, an unchanged one as `-`.
    static func ids(_ ids: (uid: UInt32, gid: UInt32)) -> String {
        (ids.uid == UInt32.max ? "-" : "\(ids.uid)") + ":" + (ids.gid == UInt32.max ? "-" : "\(ids.gid)")
    }
}

extension RestoreWriter {
    /// For a dry run: what a restore would do at the item's destination, touching nothing
    /// and following no link below the root (a same-size file is read to compare).
    package static func inspect(_ item: RestoreItem, overwrite: Bool) -> ConflictRule.Decision {
        let writer = RestoreWriter(overwrite: overwrite, rule: OwnerRule(owners: .keep, mayChown: false, umask: 0o022), folderOwners: [:],
                                   walkOnly: false)
        let parts = Self.components(item.destination)
        guard let name = parts.last, parts.allSatisfy(RestorePlan.isSafeName) else {
            return .keep("the manifest names an unsafe path (an empty, '.' or '..' part): not restored")
        }
        let root = open(item.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { return .write }
        defer { close(root) }
        let dir: Int32
        do throws(Failure) {
            dir = try writer.openBelow(root, rootPath: item.root, folder: parts.dropLast(), create: false)
        } catch {
            return error.missing ? .write : .keep(error.message)
        }
        defer { close(dir) }
        var st = stat()
        let existing: ConflictRule.Existing = withCString(name) { fstatat(dir, $0, &st, AT_SYMLINK_NOFOLLOW) } == 0 ? Self.existing(st) : .nothing
        let decision = ConflictRule.decide(existing, size: item.version.size, overwrite: overwrite)
        guard decision == .compare else { return decision }
        let fd = withCString(name) { openat(dir, $0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard fd >= 0 else { return .write }
        defer { close(fd) }
        return ConflictRule.compared(sameBytes: holds(fd, item.version), overwrite: overwrite)
    }
}
