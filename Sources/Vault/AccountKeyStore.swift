#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PhotolalaCore

/// What a NAS keeps about the account key (privacy.md), in `state_dir/account-key`.
package struct AccountKeyState: Sendable, Equatable, CustomStringConvertible {
    /// Why the key object in the bucket may not match this state yet.
    package enum Pending: Sendable, Equatable {
        /// The account key was made here; its key object is not yet confirmed in the bucket.
        case creating
        /// A new recovery key is being put in place of `previous` (kept until the bucket
        /// confirms the new key object, so the account stays readable with a key the user
        /// was shown whatever happens).
        case rotating(previous: RecoveryKey, previousCreatedAt: Int64)
        /// A new account key (and recovery key) being put in place of `previous` by
        /// `recovery-key --rotate --new-account-key`: every object under the account's
        /// metadata is sealed again under it. Both stay until the bucket holds the new key
        /// object alone, so whatever a kill -9 interrupts, the account stays readable with
        /// a recovery key the user was shown or `recovery-key` shows.
        case newAccountKey(Replaced)
    }

    /// The account key (and its recovery key) a new account key replaces, kept until the
    /// bucket's key object holds the new key alone.
    package struct Replaced: Sendable, Equatable {
        package var accountKey: AccountKey
        package var recoveryKey: RecoveryKey
        package var recoveryCreatedAt: Int64
        package var generation: UInt64
        /// The transitional key object reached the bucket: objects are being sealed again
        /// under the new key, and the step is never undone.
        package var resealing: Bool

        package init(accountKey: AccountKey, recoveryKey: RecoveryKey, recoveryCreatedAt: Int64, generation: UInt64, resealing: Bool = false) {
            self.accountKey = accountKey
            self.recoveryKey = recoveryKey
            self.recoveryCreatedAt = recoveryCreatedAt
            self.generation = generation
            self.resealing = resealing
        }
    }

    /// The account this key belongs to: another account's state is never used.
    package var userId: String
    package var accountKey: AccountKey
    package var recoveryKey: RecoveryKey
    /// When the recovery key was made, Unix milliseconds (also sealed in the key object).
    package var recoveryCreatedAt: Int64
    package var pending: Pending?
    /// When the recovery key was last shown (`recovery-key`, `--rotate`) or entered on this
    /// NAS, Unix milliseconds; nil: never since it was made or last rotated. `logout` keeps
    /// the key while it is nil (privacy.md "No side doors": it may be the only copy).
    package var recoveryShownAt: Int64?
    /// The key object's generation this recovery key was written with (0 before there were
    /// generations): an older one coming back is an old copy put back.
    package var generation: UInt64

    package init(userId: String, accountKey: AccountKey, recoveryKey: RecoveryKey, recoveryCreatedAt: Int64, pending: Pending? = nil,
                 recoveryShownAt: Int64? = nil, generation: UInt64 = 0) {
        self.userId = userId
        self.accountKey = accountKey
        self.recoveryKey = recoveryKey
        self.recoveryCreatedAt = recoveryCreatedAt
        self.pending = pending
        self.recoveryShownAt = recoveryShownAt
        self.generation = generation
    }

    package var fingerprint: String { accountKey.fingerprint }

    /// No secret in it.
    package var description: String {
        "AccountKeyState(fingerprint \(fingerprint)\(pending == nil ? "" : ", pending"))"
    }
}

/// Reads and writes `state_dir/account-key`: mode 0600, replaced atomically (a temporary
/// file, synced, renamed over it, the folder synced), so a kill -9 or a power cut leaves
/// the old state or the new one, never a mix or nothing.
package struct AccountKeyStore: Sendable {
    package static let fileName = "account-key"
    static let temporaryName = "account-key.tmp"
    /// The version being replaced, kept by a second link until the new one is in place,
    /// then overwritten: no version of the key file is unlinked with its bytes intact.
    static let previousName = "account-key.old"
    /// The file is a few hundred bytes; anything much larger is not ours.
    static let maxSize = 16 * 1024

    package struct Failure: Error, Equatable, CustomStringConvertible {
        package var message: String
        init(_ message: String) { self.message = message }
        package var description: String { message }
    }

    package let directory: String

    package init(directory: String) {
        self.directory = directory
    }

    package var path: String { directory + "/" + Self.fileName }

    /// The state, or nil when there is none (never signed in, or after a logout).
    package func load() throws(Failure) -> AccountKeyState? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 && errno == ENOENT { return nil }
        guard fd >= 0 else { throw Failure("cannot read \(path): \(Self.errorText())") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_size <= Self.maxSize else {
            throw Failure("\(path) is not the account key file this daemon writes; move it away and enter the recovery key again (photolalactl recovery-key --enter)")
        }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw Failure("cannot read \(path): \(n < 0 ? Self.errorText() : "it ended early")") }
            done += n
        }
        return try Self.decode(bytes, path: path)
    }

    /// Replaces the state on disk, atomically.
    package func save(_ state: AccountKeyState) throws(Failure) {
        let bytes = Self.encode(state)
        let dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dir >= 0 else { throw Failure("cannot open \(directory): \(Self.errorText())") }
        defer { close(dir) }
        // Left by a write that was killed: ours by its name, never followed (unlink does not).
        unlinkat(dir, Self.temporaryName, 0)
        let fd = openat(dir, Self.temporaryName, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure("cannot write in \(directory): \(Self.errorText())") }
        var failure: String?
        if fchmod(fd, 0o600) != 0 { failure = Self.errorText() }
        var done = 0
        while failure == nil && done < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { failure = Self.errorText() } else { done += n }
        }
        if failure == nil && fsync(fd) != 0 { failure = Self.errorText() }
        close(fd)
        // A previous version left by a kill -9 is overwritten first; then the current one
        // gets a second name, so that once the rename has replaced it its bytes can still
        // be reached, and overwritten.
        if failure == nil {
            do throws(Shred.Failure) {
                try Shred.remove(Self.previousName, at: dir, shown: directory + "/" + Self.previousName)
            } catch {
                failure = error.message
            }
        }
        if failure == nil && linkat(dir, Self.fileName, dir, Self.previousName, 0) != 0 && errno != ENOENT { failure = Self.errorText() }
        if failure == nil && renameat(dir, Self.temporaryName, dir, Self.fileName) != 0 { failure = Self.errorText() }
        guard failure == nil else {
            _ = try? Shred.remove(Self.temporaryName, at: dir, shown: directory + "/" + Self.temporaryName)
            unlinkat(dir, Self.previousName, 0)
            throw Failure("cannot write \(path): \(failure!)")
        }
        guard fsync(dir) == 0 else { throw Failure("cannot sync \(directory): \(Self.errorText())") }
        do throws(Shred.Failure) {
            try Shred.remove(Self.previousName, at: dir, shown: directory + "/" + Self.previousName)
        } catch {
            throw Failure("the new key file is in place, but its previous version could not be overwritten: \(error)")
        }
        guard fsync(dir) == 0 else { throw Failure("cannot sync \(directory): \(Self.errorText())") }
    }

    /// Removes a temporary file a killed `save` left (never followed: unlink does not).
    package func removeTemporary() {
        let dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dir >= 0 else { return }
        unlinkat(dir, Self.temporaryName, 0)
        close(dir)
    }

    /// Removes the state (logout): every version of the file is overwritten with zeros and
    /// synced before it is unlinked. Nothing to remove is fine.
    package func erase() throws(Failure) {
        do throws(Shred.Failure) {
            for name in [Self.temporaryName, Self.previousName, Self.fileName] {
                try Shred.remove(name, in: directory)
            }
        } catch {
            throw Failure(error.message)
        }
    }

    // MARK: the file's format

    /// The file as JSON. `accountKey` is base64; the recovery key as the user sees it (its
    /// check then guards it on disk too); `fingerprint` lets a damaged key be noticed.
    struct File: Codable {
        struct Pending: Codable {
            var step: String
            var previousRecoveryKey: String?
            var previousRecoveryKeyCreatedAt: Int64?
            var previousAccountKey: String?
            var previousGeneration: UInt64?
            var resealing: Bool?
        }

        var format: Int
        var userId: String
        var accountKey: String
        var fingerprint: String
        var recoveryKey: String
        var recoveryKeyCreatedAt: Int64
        var pending: Pending?
        /// Absent in files written before it existed: never shown, as far as this NAS knows.
        var recoveryKeyShownAt: Int64?
        var generation: UInt64?
    }

    static func encode(_ s: AccountKeyState) -> [UInt8] {
        var pending: File.Pending?
        switch s.pending {
        case nil: pending = nil
        case .creating?: pending = .init(step: "create")
        case .rotating(let previous, let at)?: pending = .init(step: "rotate", previousRecoveryKey: previous.formatted, previousRecoveryKeyCreatedAt: at)
        case .newAccountKey(let old)?:
            pending = .init(step: "new-account-key", previousRecoveryKey: old.recoveryKey.formatted, previousRecoveryKeyCreatedAt: old.recoveryCreatedAt,
                            previousAccountKey: Data(old.accountKey.bytes).base64EncodedString(), previousGeneration: old.generation,
                            resealing: old.resealing)
        }
        let file = File(format: 1, userId: s.userId, accountKey: Data(s.accountKey.bytes).base64EncodedString(), fingerprint: s.fingerprint,
                        recoveryKey: s.recoveryKey.formatted, recoveryKeyCreatedAt: s.recoveryCreatedAt, pending: pending,
                        recoveryKeyShownAt: s.recoveryShownAt, generation: s.generation == 0 ? nil : s.generation)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        // Cannot fail: strings and integers only.
        return Array(try! encoder.encode(file)) + [0x0A]
    }

    static func decode(_ bytes: [UInt8], path: String) throws(Failure) -> AccountKeyState {
        let damaged = "\(path) is damaged; move it away and enter the account's recovery key again (photolalactl recovery-key --enter)"
        guard let file = try? JSONDecoder().decode(File.self, from: Data(bytes)) else { throw Failure(damaged) }
        guard file.format == 1 else { throw Failure("\(path) was written by a newer photolalad (format \(file.format)): update photolalad") }
        guard let key = Data(base64Encoded: file.accountKey), key.count == AccountKey.size else { throw Failure(damaged) }
        let accountKey = AccountKey(bytes: Array(key))
        guard accountKey.fingerprint == file.fingerprint, let recovery = try? RecoveryKey.parse(file.recoveryKey) else { throw Failure(damaged) }
        var state = AccountKeyState(userId: file.userId, accountKey: accountKey, recoveryKey: recovery, recoveryCreatedAt: file.recoveryKeyCreatedAt,
                                    recoveryShownAt: file.recoveryKeyShownAt, generation: file.generation ?? 0)
        switch (file.pending?.step, file.pending?.previousRecoveryKey, file.pending?.previousRecoveryKeyCreatedAt) {
        case (nil, _, _): break
        case ("create"?, _, _): state.pending = .creating
        case ("rotate"?, let previous?, let at?):
            guard let old = try? RecoveryKey.parse(previous) else { throw Failure(damaged) }
            state.pending = .rotating(previous: old, previousCreatedAt: at)
        case ("new-account-key"?, let previous?, let at?):
            guard let old = try? RecoveryKey.parse(previous), let text = file.pending?.previousAccountKey,
                  let key = Data(base64Encoded: text), key.count == AccountKey.size else { throw Failure(damaged) }
            state.pending = .newAccountKey(.init(accountKey: AccountKey(bytes: Array(key)), recoveryKey: old, recoveryCreatedAt: at,
                                                 generation: file.pending?.previousGeneration ?? 0, resealing: file.pending?.resealing ?? false))
        default: throw Failure(damaged)
        }
        return state
    }

    static func errorText() -> String { String(cString: strerror(errno)) }
}
