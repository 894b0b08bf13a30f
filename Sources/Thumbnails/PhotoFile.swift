import Digests
import PhotolalaCore
import Previews

/// A live file holding a photo's bytes, opened for the preview worker through its
/// `VerifiedFile` (the very file that was hashed: device, inode, size, mtime). The daemon
/// reads only its first bytes — the head MD5 and the format — and hands the descriptor to
/// the worker; it never decodes the image itself.
final class PhotoFile: Sendable {
    private let file: VerifiedFile

    enum OpenFailure: Error, Equatable {
        /// Gone, replaced or changed since it was hashed.
        case notTheHashedFile
        case unreadable(String)
    }

    var fd: Int32 { file.descriptor }
    var path: String { file.path }
    var identity: FileIdentity { file.identity }

    init(path: String, expected: FileIdentity, followSymlinks: Bool) throws(OpenFailure) {
        do {
            file = try VerifiedFile(path: path, expected: expected, followSymlinks: followSymlinks)
        } catch {
            throw Self.failure(error)
        }
    }

    /// The MD5 of the first 4096 bytes (the whole file if shorter) and the format from
    /// the first bytes (app-catalog.md).
    func head() throws(OpenFailure) -> (md5: String, format: PhotoFormat) {
        var bytes = [UInt8](repeating: 0, count: Int(min(Int64(PhotoFormat.sniffLength), identity.size)))
        var failure: VerifiedFile.Failure?
        let got = bytes.withUnsafeMutableBytes { buffer -> Int in
            do throws(VerifiedFile.Failure) {
                return try file.read(filling: buffer, at: 0)
            } catch {
                failure = error
                return 0
            }
        }
        if let failure { throw Self.failure(failure) }
        // Shorter than hashed: not that file any more.
        guard got == bytes.count else { throw .notTheHashedFile }
        return (Hex.string(MD5.digest(Array(bytes.prefix(4096)))), PhotoFormat.sniff(bytes))
    }

    /// Still the hashed file, by its descriptor and by its path.
    func unchanged() -> Bool {
        file.isUnchanged
    }

    private static func failure(_ error: VerifiedFile.Failure) -> OpenFailure {
        switch error {
        case .vanished, .changed, .notRegularFile: .notTheHashedFile
        case .unreadable(let why): .unreadable(why)
        }
    }
}
