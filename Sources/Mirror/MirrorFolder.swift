#if canImport(Glibc)
import Glibc
#endif
import Digests
import Foundation
import PhotolalaCore

/// The mirror's folder as the filesystem has it (mirror.md): made the first time if its
/// parent exists, with a marker file in it (`.photolala-mirror`); from then on a missing
/// folder or marker means the volume is not mounted (Syncthing's `.stfolder` rule), and
/// the mirror waits rather than fill the disk underneath. Looking never writes: only a
/// first time, or a marker to put back, does.
package struct MirrorFolder: Sendable {
    package let path: String
    /// For the folder the mirror creates.
    let dirMode: UInt32
    let owner: (uid: UInt32, gid: UInt32)?

    package init(path: String, dirMode: UInt32, owner: (uid: UInt32, gid: UInt32)?) {
        self.path = path
        self.dirMode = dirMode
        self.owner = owner
    }

    /// What the folder is now.
    package enum Standing: Sendable, Equatable {
        /// The folder with its marker: its id and the account it mirrors (a digest of the
        /// user id); nil: an empty marker, made by hand.
        case ready(markerId: String?, account: String?)
        /// The folder is there without a marker.
        case unmarked
        /// No folder; `parentExists` says whether it may be made.
        case missing(parentExists: Bool)
        /// There is something, but not a folder this user can use (words say what).
        case unusable(String)
    }

    package func look() -> Standing {
        var st = stat()
        guard stat(path, &st) == 0 else {
            let err = errno
            if err == ENOENT {
                var parent = stat()
                let up = (path as NSString).deletingLastPathComponent
                return .missing(parentExists: stat(up.isEmpty ? "/" : up, &parent) == 0 && parent.st_mode & S_IFMT == S_IFDIR)
            }
            return .unusable("\(path) cannot be reached: \(errnoText(err))")
        }
        guard st.st_mode & S_IFMT == S_IFDIR else { return .unusable("\(path) is not a folder") }
        let marker = path + "/" + MirrorNaming.marker
        var m = stat()
        guard lstat(marker, &m) == 0 else {
            let err = errno
            return err == ENOENT ? .unmarked : .unusable("\(marker) cannot be read: \(errnoText(err))")
        }
        guard m.st_mode & S_IFMT == S_IFREG else { return .unusable("\(marker) is not a file") }
        let read = Self.readMarker(marker)
        return .ready(markerId: read?.id, account: read?.account)
    }

    /// Why the daemon cannot write in the folder, or nil (looked at, nothing written).
    package func unwritable() -> String? {
        guard faccessat(AT_FDCWD, path, W_OK | X_OK, AT_EACCESS) != 0 else { return nil }
        let err = errno
        if err == EROFS {
            return "\(path) is read-only for photolalad: add it to the service's writable paths (sudo systemctl edit photolalad: [Service] ReadWritePaths=\(path)), or mount it read-write"
        }
        return "photolalad (uid \(getuid())) may not write in \(path): \(errnoText(err)); give its user write permission (chown or chmod)"
    }

    /// Makes the folder (its parent exists), with `dir_mode` and `owner`.
    package func create() throws(Problem) {
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else { throw Problem(path, "cannot create it") }
        if let owner, chown(path, owner.uid, owner.gid) != 0 { throw Problem(path, "cannot give it to its owner") }
        guard chmod(path, mode_t(dirMode)) == 0 else { throw Problem(path, "cannot set its mode") }
    }

    /// Writes the marker with a new id (replacing an empty or foreign one) and returns the id.
    /// `account`: `MirrorFolder.account(userId)`.
    package func mark(account: String) throws(Problem) -> String {
        let id = UUID().uuidString.lowercased()
        let text = """
            photolala-mirror \(id) \(account)
            This folder is photolalad's copy of a Photolala account (mirror.md). Keep this file:
            without it photolalad takes the folder for a volume that is not mounted, and waits.

            """
        let marker = path + "/" + MirrorNaming.marker
        let temp = path + "/" + MirrorNaming.marker + ".tmp"
        unlink(temp)
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Problem(path, "cannot write its marker \(MirrorNaming.marker)") }
        var ok = Array(text.utf8).withUnsafeBytes { raw in write(fd, raw.baseAddress, raw.count) == raw.count }
        ok = ok && fchmod(fd, 0o644) == 0 && fsync(fd) == 0
        close(fd)
        guard ok, rename(temp, marker) == 0 else {
            let err = errno
            unlink(temp)
            throw Problem(path, "cannot write its marker \(MirrorNaming.marker)", errno: err)
        }
        let dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
        return id
    }

    /// Free bytes for the daemon's user and the filesystem's size; nil when it cannot be asked.
    package func space() -> (available: Int64, total: Int64)? {
        var s = statvfs()
        guard statvfs(path, &s) == 0 else { return nil }
        let block = Int64(s.f_frsize)
        return (Int64(s.f_bavail) * block, Int64(s.f_blocks) * block)
    }

    /// Which account a folder mirrors, as its marker says it: the first 16 hex digits of the
    /// user id's SHA-256 (the marker is readable by whoever reads the photos; the id itself
    /// stays out of it).
    package static func account(_ userId: String) -> String {
        String(Hex.string(SHA256.digest(Array(userId.utf8))).prefix(16))
    }

    /// The id and account on the marker's first line (`photolala-mirror <id> <account>`);
    /// nil when it has none.
    static func readMarker(_ path: String) -> (id: String, account: String?)? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        let first = String(decoding: buffer[0..<n], as: UTF8.self).split(separator: "\n", maxSplits: 1).first ?? ""
        let words = first.split(separator: " ")
        guard (2...3).contains(words.count), words[0] == "photolala-mirror", words[1].count <= 64,
              words[1].allSatisfy({ $0.isHexDigit || $0 == "-" }) else { return nil }
        let account = words.count == 3 && words[2].count == 16 && words[2].allSatisfy(\.isHexDigit) ? String(words[2]) : nil
        return (String(words[1]), account)
    }

    package struct Problem: Error, CustomStringConvertible {
        package var description: String
        package var errno: Int32

        init(_ path: String, _ what: String, errno code: Int32 = Glibc.errno) {
            errno = code
            description = "\(path): \(what): \(errnoText(code))"
        }
    }
}

extension MirrorFolder {
    /// What making the folder ready takes now.
    enum Preparation: Equatable {
        /// Ready as it is.
        case ready
        /// Not usable now; the sentence says why and what to do.
        case problem(String)
        /// Writable and without this account's marker as recorded: the marker is to be
        /// written and the folder recorded (files already in it are then adopted).
        case claim
    }

    /// The folder against `marker`, the id recorded for it (nil: none recorded for this
    /// folder and account), and the account's tag. Makes it when missing and never marked.
    func preparation(marker: String?, account accountTag: String) -> Preparation {
        switch look() {
        case .ready(let id, let account):
            if let account, account != accountTag {
                return .problem("\(path) holds the copy of another Photolala account (its \(MirrorNaming.marker) says so): set mirror.folder to another folder, or move that one away")
            }
            if let id, id == marker, account != nil { break }
            if let problem = unwritable() { return .problem(problem) }
            return .claim
        case .unmarked:
            if marker != nil {
                return .problem("\(path) has lost its \(MirrorNaming.marker): the volume is probably not mounted, so the mirror waits. If it is the right folder, put the marker back: touch \(path)/\(MirrorNaming.marker)")
            }
            if let problem = unwritable() { return .problem(problem) }
            return .claim
        case .missing(let parentExists):
            if marker != nil {
                return .problem("\(path) is missing: the volume is probably not mounted, so the mirror waits (it never creates the folder again by itself; mount it, or remove mirror.folder)")
            }
            guard parentExists else {
                return .problem("\(path) cannot be made: the folder above it does not exist (create it, or set mirror.folder to a folder whose parent exists)")
            }
            do {
                try create()
            } catch {
                return .problem("\(error)")
            }
            return .claim
        case .unusable(let why):
            return .problem(why)
        }
        return unwritable().map(Preparation.problem) ?? .ready
    }
}
