#if canImport(Glibc)
import Glibc
#endif
import Bucket
import Digests
import Foundation
import ManifestFormat
import PhotolalaCore
import Queue
import RestoreFiles
import RestoreRelay
import RestoreWire

/// One object made a file of the mirror: what a restore does for a file (privacy.md "A
/// restore that trusts nothing"), with the mirror's naming. Its folder (`YYYY/MM`, from
/// the date alone) is opened below the root without following a link and created with
/// `dir_mode`; the bytes go to a temporary file named by the object (`O_EXCL|O_NOFOLLOW`,
/// 0600), are bounded and checked (`MirrorTransfer`); then the name is chosen (the
/// extension may come from the bytes), recorded with the object's inventory row in one
/// transaction, and the file gets `owner`, `file_mode` and the photo's date, is synced and
/// renamed into place without replacing anything, and its folder synced. A kill at any
/// instant leaves either a temporary file (replaced next time) or the copy under its final
/// name, which the next try finds holding the right bytes.
package struct MirrorCopy: Sendable {
    let database: QueueDatabase
    let transfer: MirrorTransfer
    let writer: RestoreWriter
    let paths: MirrorPaths
    let userId: String
    /// Where bodies are gathered to be written past the page cache (nil: through it).
    let directBuffers: DirectBuffers?

    package init(database: QueueDatabase, transfer: MirrorTransfer, writer: RestoreWriter, root: String, userId: String,
                 directBuffers: DirectBuffers? = .shared) {
        self.database = database
        self.transfer = transfer
        self.writer = writer
        self.paths = MirrorPaths(root: root)
        self.userId = userId
        self.directBuffers = directBuffers
    }

    package enum Outcome: Sendable, Equatable {
        /// Written (`copied`) or found there already (`adopted`): the entry as it now stands,
        /// and what could not be done to its folders (an owner the daemon may not give).
        case done(MirrorEntry, problems: [String] = [])
        case refused(String)
        case gone
        case archived
        case diskFull(String)
        case folder(String)
        case failed(String)
        case stopped
    }

    /// A copy whose bytes arrived, to be checked and put in place.
    package struct Arrived: Sendable {
        let entry: MirrorEntry
        let version: FileVersion
        let seconds: Int64
        let folder: String
        let incoming: IncomingFile
        let downloaded: MirrorTransfer.Downloaded
        let sha256: SHA256Value?
    }

    /// The first half: its bytes fetched into the temporary file (the network's part), or
    /// what came of it instead.
    package enum Begun: Sendable {
        case finished(Outcome)
        case arrived(Arrived)
    }

    /// One object, whole: both halves.
    package func copy(_ entry: MirrorEntry, sha256: SHA256Value?, now: @Sendable () -> Date) async -> Outcome {
        switch await begin(entry, sha256: sha256, now: now) {
        case .finished(let outcome): return outcome
        case .arrived(let arrived): return await complete(arrived, now: now)
        }
    }

    package func begin(_ entry: MirrorEntry, sha256: SHA256Value?, now: @Sendable () -> Date) async -> Begun {
        let seconds = MirrorPlan.date(of: entry)
        let version = FileVersion(size: entry.size, md5: entry.md5, mtimeSec: seconds, mtimeNsec: 0, sha256: sha256)
        var e = entry
        // A name given before a kill: the copy may be there already, or someone else's file.
        if let path = e.path {
            if let found = await Self.identity(paths, path) {
                if found.size == e.size, let d = await Self.digest(paths, path, sha256: sha256 != nil), d.md5 == e.md5,
                   sha256 == nil || d.sha256 == sha256 {
                    e.state = .copied
                    e.device = found.device
                    e.inode = found.inode
                    return .finished(await record(e, now: now()))
                }
                // Another file took the name meanwhile: the copy gets another.
                e.path = nil
            }
        }
        let folder = e.path.map { String($0[..<($0.lastIndex(of: "/") ?? $0.startIndex)]) } ?? MirrorNaming.folder(seconds: seconds)
        let placeholder = folder + "/" + MirrorNaming.temporaryName(e.md5)
        let item = RestoreItem(folder: "", path: Array(placeholder.utf8), version: version, root: paths.root,
                               destination: Array(placeholder.utf8))
        let incoming: IncomingFile
        do {
            let (writer, temporary) = (self.writer, Array(MirrorNaming.temporaryName(e.md5).utf8))
            // A body that comes whole, in order, is written past the page cache; ranges
            // (written at their offsets from several tasks) go through it.
            let direct = e.size <= transfer.rangeThreshold ? directBuffers : nil
            // Opens and makes folders (`openat2`, `mkdirat`): off the pool, like every call below.
            incoming = try await Blocking.run { () throws(RestoreWriter.Failure) -> IncomingFile in
                try writer.incoming(in: try writer.parent(of: item), sha256: sha256 != nil, temporaryName: temporary, direct: direct)
            }
        } catch {
            return .finished(Self.place(error))
        }
        switch await transfer.download(key: e.key(userId: userId), size: e.size, into: incoming) {
        case .failure(let outcome): return .finished(Self.outcome(outcome))
        case .success(let downloaded):
            return .arrived(Arrived(entry: e, version: version, seconds: seconds, folder: folder, incoming: incoming,
                                    downloaded: downloaded, sha256: sha256))
        }
    }

    /// The second half: read back and checked, named, recorded with its object's inventory
    /// row, given its owner, mode and time, synced, renamed into place, its folder synced.
    package func complete(_ a: Arrived, now: @Sendable () -> Date) async -> Outcome {
        var e = a.entry
        let (sha256, seconds, folder, incoming) = (a.sha256, a.seconds, a.folder, a.incoming)
        let fetched: MirrorTransfer.Fetched
        switch await transfer.verify(incoming, md5: e.md5, size: e.size, sha256: sha256, downloaded: a.downloaded) {
        case .success(let f): fetched = f
        case .failure(let outcome): return Self.outcome(outcome)
        }
        let ext = e.ext ?? ExportFormat.ext(catalogFormat: nil, originalFormat: fetched.originalFormat, contentType: fetched.contentType)
            ?? ExportFormat.ext(head: fetched.head)
        e.ext = ExportFormat.known(ext)
        // The name: the one given before, or the first free one.
        var name: String? = e.path
        if name == nil {
            for n in 0..<MirrorNaming.maxCandidates {
                let candidate = MirrorNaming.candidate(n, seconds: seconds, md5: e.md5, ext: e.ext!)
                if (try? await database.mirrorPathTaken(candidate, by: e.md5)) != false { continue }
                guard let there = await Self.identity(paths, candidate) else {
                    name = candidate
                    break
                }
                // A file with these very bytes is there (a restore --by-date, a copy of the user's): adopted.
                if there.size == e.size, let d = await Self.digest(paths, candidate, sha256: sha256 != nil), d.md5 == e.md5,
                   sha256 == nil || d.sha256 == sha256 {
                    incoming.discard()
                    e.path = candidate
                    e.state = .adopted
                    e.device = there.device
                    e.inode = there.inode
                    return await record(e, now: now())
                }
            }
        }
        guard let name else {
            incoming.discard()
            return .failed("no free name for it in \(folder): \(MirrorNaming.maxCandidates) names are taken by other files")
        }
        e.path = name
        do {
            try await database.mirrorNaming(e, key: e.key(userId: userId), etag: e.md5.hex, now: now())
        } catch {
            incoming.discard()
            return .failed("the queue database: \(error)")
        }
        let file = Array((name.split(separator: "/").last.map(String.init) ?? name).utf8)
        let placed: Bool
        do {
            let (version, digests) = (a.version, fetched.digests)
            // fsync and rename: on `Blocking`'s threads.
            placed = try await Blocking.run { () throws(RestoreWriter.Failure) -> Bool in
                try incoming.commit(version, replace: false, readBack: digests, name: file)
            }
        } catch {
            return Self.place(error)
        }
        // A file appeared at the name meanwhile: the next try looks at it again.
        guard placed else { return .failed("a file appeared at \(name) while the copy arrived; tried again later") }
        // The renames survive a power cut before the entry says so (else a lost rename would
        // read as a copy the user deleted, never fetched again).
        let writer = self.writer
        let problems = await Blocking.run { writer.finish() }
        guard let there = await Self.identity(paths, name) else { return .failed("\(name) is not there after it was put in place") }
        e.state = .copied
        e.device = there.device
        e.inode = there.inode
        e.attempts = 0
        e.nextAttemptAt = nil
        e.lastError = nil
        return await record(e, now: now(), problems: problems)
    }

    /// A file's digests read on `Blocking`'s threads: a copy may be gigabytes, and the
    /// cooperative pool has a thread per core.
    private static func digest(_ paths: MirrorPaths, _ path: String, sha256: Bool) async
        -> (md5: MD5Value, sha256: SHA256Value?, size: Int64, device: UInt64, inode: UInt64)? {
        await Blocking.run { paths.digest(of: path, sha256: sha256) }
    }

    /// A name's `lstat`, on `Blocking`'s threads (a busy disk can take a while to answer).
    private static func identity(_ paths: MirrorPaths, _ path: String) async -> (device: UInt64, inode: UInt64, size: Int64)? {
        await Blocking.run { paths.identity(of: path) }
    }

    /// What a transfer's outcome is for the stage.
    static func outcome(_ o: MirrorTransfer.Outcome) -> Outcome {
        switch o {
        case .fetched: .failed("fetched but not put in place")
        case .refused(let why): .refused(why)
        case .gone: .gone
        case .archived: .archived
        case .diskFull(let why): .diskFull(why)
        case .folder(let why): .folder(why)
        case .failed(let why): .failed(why)
        case .stopped: .stopped
        }
    }

    private func record(_ e: MirrorEntry, now: Date, problems: [String] = []) async -> Outcome {
        do {
            try await database.saveMirror(e, now: now)
        } catch {
            return .failed("the queue database: \(error)")
        }
        return .done(e, problems: problems)
    }

    /// A folder or temporary file that could not be made: a full disk, or the folder.
    static func place(_ error: RestoreWriter.Failure) -> Outcome {
        if let code = error.errno, code == ENOSPC || code == EDQUOT { return .diskFull(error.message) }
        return .folder(error.message)
    }
}
