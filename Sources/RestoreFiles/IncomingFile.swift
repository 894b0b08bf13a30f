#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Digests
import Foundation
import ManifestFormat
import PhotolalaCore
import Synchronization

/// One file's bytes on their way in: written to the temporary file, read back by
/// `OpenFileLanes` (many files' MD5s at once cost a fraction of one stream each, so
/// nothing is hashed on the way in), then checked against those digests and put in place,
/// or thrown away.
///
/// One owner at a time writes, checks and commits it; the ranges of one object may be
/// written at once from several tasks (`write(_:at:)`, each at its own offset), so the
/// descriptor and the count are atomics.
///
/// Given `DirectBuffers`, a body `append`ed in order is gathered a megabyte at a time in an
/// aligned buffer and written past the page cache (`O_DIRECT`): on the machines measured,
/// copying each body into fresh page-cache pages was the costliest thing a pull did
/// (docs/benchmarks.md, "The mirror's writes past the page cache"). The tail, rarely a
/// whole number of blocks, goes through the page cache at `settle()`; where the
/// filesystem refuses `O_DIRECT`, everything does, as before.
package final class IncomingFile: Sendable {
    let parent: RestoreWriter.Parent
    let temp: [UInt8]
    private let file: Atomic<Int32>
    private let takesSHA: Bool
    private let count = Atomic<Int64>(0)
    private let buffers: DirectBuffers?
    private let staging: Mutex<Staging?>

    init(parent: RestoreWriter.Parent, temp: [UInt8], fd: Int32, sha256: Bool, direct: DirectBuffers? = nil) {
        self.parent = parent
        self.temp = temp
        self.file = Atomic(fd)
        takesSHA = sha256
        buffers = direct
        var staging: Staging?
        if let direct, photolala_set_direct(fd, 1) == 0 {
            if let block = direct.take() {
                staging = Staging(block: block, size: direct.size)
            } else {
                _ = photolala_set_direct(fd, 0)
            }
        }
        self.staging = Mutex(staging)
    }

    /// Whether bytes appended now go past the page cache.
    package var writesDirect: Bool { staging.withLock { $0?.direct ?? false } }

    private var fd: Int32 { file.load(ordering: .acquiring) }

    /// Bytes written so far.
    package var written: Int64 { count.load(ordering: .acquiring) }

    /// The open temporary file, for reading it back (`OpenFileLanes`); -1 once committed or discarded.
    package var descriptor: Int32 { fd }
    /// Whether the SHA-256 is to be taken (the manifest recorded one).
    package var wantsSHA256: Bool { takesSHA }

    deinit {
        if fd >= 0 { discard() }
        releaseStaging()
    }

    package func append(_ bytes: UnsafeRawBufferPointer) throws(RestoreWriter.Failure) {
        let fd = self.fd
        let staged: (Bool, Int32) = staging.withLock { s in
            guard s != nil else { return (false, 0) }
            return (true, s!.take(bytes, fd: fd))
        }
        if staged.0 {
            guard staged.1 == 0 else { throw failure(staged.1) }
            count.add(Int64(bytes.count), ordering: .releasing)
            return
        }
        var offset = 0
        while offset < bytes.count {
            let n = retryingInterrupts { Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset) }
            guard n >= 0 else { throw RestoreWriter.Failure("cannot write in \(parent.path): \(RestoreWriter.errno())", errno: Glibc.errno) }
            offset += n
        }
        count.add(Int64(bytes.count), ordering: .releasing)
    }

    /// `bytes` at `offset` (a range of the object, written beside the others).
    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(RestoreWriter.Failure) {
        try settle()
        var done = 0
        let fd = self.fd
        while done < bytes.count {
            let n = retryingInterrupts { pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done)) }
            guard n >= 0 else { throw RestoreWriter.Failure("cannot write in \(parent.path): \(RestoreWriter.errno())", errno: Glibc.errno) }
            done += n
        }
        count.add(Int64(bytes.count), ordering: .releasing)
    }

    /// Checks the bytes against `version`, gives the file its owner, mode and modification
    /// time (on the open file), syncs, and renames into place relative to its open folder
    /// (replacing what is there only when `replace`). Returns false when a file appeared at
    /// the name meanwhile and was left alone. `readBack`: the digests `OpenFileLanes` took
    /// of the written file.
    /// `name`: another name in the same folder than the parent's (the mirror names a copy
    /// once its bytes say what it is).
    package func commit(_ version: FileVersion, replace: Bool, readBack: OpenFileDigests, name: [UInt8]? = nil) throws(RestoreWriter.Failure) -> Bool {
        do {
            try settle()
        } catch {
            discard()
            throw error
        }
        let fd = self.fd
        let digest = MD5Value(bytes: readBack.md5)
        guard written == version.size, digest == version.md5 else {
            discard()
            throw RestoreWriter.Failure("the object photos/…/\(version.md5.hex).dat holds other bytes than its name says (\(written) bytes, MD5 \(digest?.hex ?? "?")): it changed in the bucket; not restored")
        }
        // MD5 collisions are practical: the SHA-256 the manifest recorded has the last word.
        if let expected = version.sha256 {
            let found = takesSHA ? readBack.sha256.flatMap { SHA256Value(bytes: $0) } : nil
            guard found == expected else {
                discard()
                throw RestoreWriter.Failure("the object photos/…/\(version.md5.hex).dat has the right MD5 but not the SHA-256 the manifest recorded (\(found?.hex ?? "not taken")): it was replaced in the bucket by other bytes; not restored")
            }
        }
        // Owner first: chown clears setuid and setgid, and the mode is the last word.
        if let owner = parent.attributes.owner, fchown(fd, owner.uid, owner.gid) != 0 {
            let why = RestoreWriter.errno()
            discard()
            throw RestoreWriter.Failure("cannot give the file to \(owner.uid):\(owner.gid) in \(parent.path): \(why)")
        }
        guard fchmod(fd, mode_t(parent.attributes.mode)) == 0 else {
            let why = RestoreWriter.errno()
            discard()
            throw RestoreWriter.Failure("cannot set the file's mode in \(parent.path): \(why)")
        }
        var times = [timespec(tv_sec: Int(version.mtimeSec), tv_nsec: Int(version.mtimeNsec)),
                     timespec(tv_sec: Int(version.mtimeSec), tv_nsec: Int(version.mtimeNsec))]
        guard futimens(fd, &times) == 0 else {
            let why = RestoreWriter.errno()
            discard()
            throw RestoreWriter.Failure("cannot set the modification time in \(parent.path): \(why)")
        }
        guard fdatasync(fd) == 0 else {
            let code = Glibc.errno
            let why = RestoreWriter.errno()
            discard()
            throw RestoreWriter.Failure("cannot write in \(parent.path): \(why)", errno: code)
        }
        close(file.exchange(-1, ordering: .acquiringAndReleasing))
        let renamed: Int32 = RestoreWriter.withCString(temp) { t in
            RestoreWriter.withCString(name ?? parent.name) { n in
                if replace { return renameat(parent.fd, t, parent.fd, n) }
                return RestoreWriter.renameNoReplace(parent.fd, t, parent.fd, n)
            }
        }
        if renamed == 0 {
            parent.book.touched(.init(root: parent.root, path: parent.folder))
            return true
        }
        let err = Glibc.errno
        _ = RestoreWriter.withCString(temp) { unlinkat(parent.fd, $0, 0) }
        if err == EEXIST { return false }
        throw RestoreWriter.Failure("cannot put the file in place in \(parent.path): \(String(cString: strerror(err)))")
    }

    /// Closes and removes the temporary file.
    package func discard() {
        releaseStaging()
        let fd = file.exchange(-1, ordering: .acquiringAndReleasing)
        if fd >= 0 { close(fd) }
        _ = RestoreWriter.withCString(temp) { unlinkat(parent.fd, $0, 0) }
    }

    /// Writes what is gathered and gives the buffer back: what is read back or committed
    /// after this is in the file. The tail goes through the page cache (it is rarely a
    /// whole number of blocks). Nothing happens without a gathered body, or a second time.
    package func settle() throws(RestoreWriter.Failure) {
        let fd = self.fd
        let code: Int32 = staging.withLock { s in
            guard var current = s else { return 0 }
            s = nil
            defer { buffers?.give(current.block) }
            if current.direct && photolala_set_direct(fd, 0) == 0 { current.direct = false }
            let code = current.flush(fd: fd)
            // The gathered writes went to their offsets (`pwrite`): the file's position
            // moves to its end, where a later `append` would write.
            if code == 0 && lseek(fd, off_t(current.flushed), SEEK_SET) < 0 { return Glibc.errno }
            return code
        }
        guard code == 0 else { throw failure(code) }
    }

    private func releaseStaging() {
        if let block = staging.withLock({ s -> DirectBuffers.Block? in defer { s = nil }; return s?.block }) {
            buffers?.give(block)
        }
    }

    private func failure(_ code: Int32) -> RestoreWriter.Failure {
        RestoreWriter.Failure("cannot write in \(parent.path): \(String(cString: strerror(code)))", errno: code)
    }

    /// A body on its way past the page cache: `filled` bytes gathered after the `flushed`
    /// ones already in the file, whose count is always a whole number of buffers (so every
    /// direct write starts at an aligned offset).
    struct Staging {
        let block: DirectBuffers.Block
        let size: Int
        var filled = 0
        var flushed: Int64 = 0
        var direct = true

        /// Gathers `bytes`, writing each full buffer: 0, or the errno of a failed write.
        mutating func take(_ bytes: UnsafeRawBufferPointer, fd: Int32) -> Int32 {
            var offset = 0
            while offset < bytes.count {
                let n = min(size - filled, bytes.count - offset)
                (block.base + filled).copyMemory(from: bytes.baseAddress! + offset, byteCount: n)
                filled += n
                offset += n
                if filled == size {
                    let code = flush(fd: fd)
                    if code != 0 { return code }
                }
            }
            return 0
        }

        /// The gathered bytes written at their offset: 0, or the errno.
        mutating func flush(fd: Int32) -> Int32 {
            var done = 0
            while done < filled {
                let n = retryingInterrupts { pwrite(fd, block.base + done, filled - done, off_t(flushed) + off_t(done)) }
                if n < 0 {
                    let code = Glibc.errno
                    // A filesystem that took O_DIRECT but refuses this write (its blocks are
                    // larger than a page, or a short write left the offset unaligned): the
                    // rest goes through the page cache.
                    if code == EINVAL && direct && photolala_set_direct(fd, 0) == 0 {
                        direct = false
                        continue
                    }
                    return code
                }
                done += n
            }
            flushed += Int64(filled)
            filled = 0
            return 0
        }
    }
}

extension RestoreWriter {
    /// `renameat2(RENAME_NOREPLACE)`; where the filesystem lacks it (EINVAL, ENOSYS), a
    /// hard link (which cannot replace either) and the old name unlinked: the file stays,
    /// under its new name. 0, or -1 with `errno` set (EEXIST: the name is taken). The
    /// restore's and the mirror's one way to put a file at a name without replacing one.
    package static func renameNoReplace(_ fromDir: Int32, _ from: UnsafePointer<CChar>, _ toDir: Int32, _ to: UnsafePointer<CChar>) -> Int32 {
        let r = photolala_rename_noreplace(fromDir, from, toDir, to)
        guard r != 0 && (Glibc.errno == EINVAL || Glibc.errno == ENOSYS) else { return r }
        let linked = linkat(fromDir, from, toDir, to, 0)
        if linked == 0 { unlinkat(fromDir, from, 0) }
        return linked
    }
}
