import Bucket
import Digests
import Foundation
import NIOCore
import PhotolalaCore
import Synchronization

/// The apps' catalog read as app-catalog.md says, for whatever dates photos by it
/// (`restore --by-date`, the mirror): the pointer, then the snapshot it names, its MD5
/// checked against its name, into a table on disk (`CatalogDates`). The pointer alone is
/// the cheap "anything new?" (one GET); the snapshot is read only when it names another.
package struct AppCatalogCopy: Sendable {
    package let session: BucketSession
    package let userId: String
    package let budget: BucketBudget
    /// Where the snapshot's copy and its table go (the state directory).
    package let directory: String
    /// A snapshot larger than this is not read (the dates come from the objects' times).
    package var maxCatalogBytes: Int64 = 2 << 30

    package init(session: BucketSession, userId: String, budget: BucketBudget, directory: String, maxCatalogBytes: Int64 = 2 << 30) {
        self.session = session
        self.userId = userId
        self.budget = budget
        self.directory = directory
        self.maxCatalogBytes = maxCatalogBytes
    }

    /// The bucket could not be read: the caller stops and tries again.
    package struct Failure: Error, CustomStringConvertible {
        package var why: String
        package var description: String { why }
        /// The request was not made or was cut: signed out, paused, stopping.
        package var interrupted = false
    }

    /// The catalog is of no use (no MD5 in the pointer, a snapshot that is not there or
    /// not what its name says, too big): dates come from the objects' times.
    package struct Unreadable: Error, Equatable {
        package var why: String
    }

    /// What the pointer says now.
    package enum Pointer: Sendable, Equatable {
        /// No pointer: the account has no catalog yet.
        case none
        /// The snapshot's MD5, as the pointer spells it.
        case snapshot(String)
        /// Not an MD5.
        case malformed
    }

    private var catalogs: String { "catalogs/\(userId)/" }
    private var pointerKey: String { catalogs + ".photolala.md5" }

    /// One GET of the pointer.
    package func pointer() async throws(Failure) -> Pointer {
        let key = pointerKey
        let body: [UInt8]?
        do {
            body = try await session.perform(under: catalogs, budget: budget) { bucket throws(S3Error) in
                try await bucket.getObjectIfPresent(key: key)?.bytes
            }
        } catch {
            throw Failure(why: "the apps' catalog could not be read (\(key)): \(error); run the command again",
                          interrupted: error.kind == .cancelled || error.kind == .unavailable)
        }
        guard let body else { return .none }
        guard body.count <= 256, let md5 = Self.pointerMD5(body) else { return .malformed }
        return .snapshot(md5)
    }

    /// The pointer, then the table of the snapshot it names (nil: no catalog).
    package func read() async throws(Failure) -> Result<(pointer: String, dates: CatalogDates)?, Unreadable> {
        switch try await pointer() {
        case .none: return .success(nil)
        case .malformed: return .failure(Unreadable(why: "the catalog's pointer (\(pointerKey)) does not hold an MD5"))
        case .snapshot(let md5):
            return try await table(md5).map { (md5, $0) }
        }
    }

    /// The table of the snapshot `md5` names.
    package func table(_ md5: String) async throws(Failure) -> Result<CatalogDates, Unreadable> {
        let key = catalogs + ".photolala.\(md5).csv"
        let copy: (file: ScratchFile, md5: String)?
        do {
            copy = try await download(key)
        } catch let error as Unreadable {
            return .failure(error)
        } catch let error as Failure {
            throw error
        } catch {
            throw Failure(why: "\(error)")
        }
        guard let copy else { return .failure(Unreadable(why: "the catalog's pointer names \(key), which is not in the bucket")) }
        guard copy.md5 == md5.lowercased() else {
            return .failure(Unreadable(why: "\(key) holds other bytes than its name says (MD5 \(copy.md5))"))
        }
        let directory = self.directory
        do {
            return .success(try await Self.blocking { cancelled throws(ScratchFile.Failure) in
                try CatalogDates.build(snapshot: copy.file, directory: directory, cancelled: cancelled)
            })
        } catch {
            throw Failure(why: "the apps' catalog could not be read into \(directory): \(error)")
        }
    }

    /// The snapshot into a scratch file, its MD5 taken on the way; nil when it is not there.
    private func download(_ key: String) async throws -> (file: ScratchFile, md5: String)? {
        let catalogs = self.catalogs
        let info: S3Client.ObjectInfo?
        do {
            info = try await session.perform(under: catalogs, budget: budget) { bucket throws(S3Error) in try await bucket.headObject(key: key) }
        } catch {
            throw Failure(why: "the apps' catalog could not be read (\(key)): \(error); run the command again",
                          interrupted: error.kind == .cancelled || error.kind == .unavailable)
        }
        guard let info else { return nil }
        guard info.size <= maxCatalogBytes else {
            throw Unreadable(why: "\(key) is \(info.size) bytes, more than a catalog of \(maxCatalogBytes >> 30) GiB can be")
        }
        let directory = self.directory
        do throws(S3Error) {
            return try await session.perform(under: catalogs, budget: budget) { bucket throws(S3Error) in
                // Each try starts over in a new file.
                let sink: Sink
                do throws(ScratchFile.Failure) {
                    sink = Sink(file: try ScratchFile(directory: directory))
                } catch {
                    throw S3Error(kind: .localFile, code: "LocalFileError", message: error.description, operation: "GetObject", key: key)
                }
                _ = try await bucket.getObject(key: key, range: nil, expectedBytes: info.size, onHead: nil) { buffer in try sink.write(buffer) }
                return (sink.file, sink.md5())
            }
        } catch where error.kind == .notFound {
            return nil
        } catch {
            throw Failure(why: "the apps' catalog could not be read (\(key)): \(error); run the command again",
                          interrupted: error.kind == .cancelled || error.kind == .unavailable)
        }
    }

    /// What a pointer holds: 32 hex digits, whitespace around them ignored (app-catalog.md).
    package static func pointerMD5(_ body: [UInt8]) -> String? {
        let text = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.utf8.count == 32, text.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) || (65...70).contains($0) }) else {
            return nil
        }
        return text
    }

    /// A streamed GET into a scratch file, with its MD5.
    private final class Sink: Sendable {
        let file: ScratchFile
        private let hash = Mutex(MD5())

        init(file: ScratchFile) {
            self.file = file
        }

        func write(_ buffer: ByteBuffer) throws {
            try hash.withLock { (md5: inout MD5) throws in
                try buffer.withUnsafeReadableBytes { raw in
                    md5.update(raw)
                    try file.append(raw)
                }
            }
        }

        func md5() -> String { hash.withLock { Hex.string($0.finalize()) } }
    }

    // MARK: blocking work

    /// Runs the catalog's sorting off Swift's cooperative pool (a million rows take seconds
    /// of file work) on `Blocking`'s threads; cancellation is passed on as a flag the work
    /// looks at.
    private static func blocking<T: Sendable>(_ work: @escaping @Sendable (_ cancelled: () -> Bool) throws(ScratchFile.Failure) -> T)
        async throws(ScratchFile.Failure) -> T
    {
        try await Blocking.run { (flag: CancelFlag) throws(ScratchFile.Failure) -> T in try work { flag.isSet } }
    }
}
