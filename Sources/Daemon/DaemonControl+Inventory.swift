#if canImport(Glibc)
import Glibc
#endif
import Control
import Foundation
import Ingest
import PhotolalaCore
import Queue

/// `verify` (the inventory stage does it; the command polls its progress) and `files`
/// (a read of the queue, a page at a time).
extension DaemonControl {
    func verify(_ request: ControlRequest) async -> ControlResponse {
        let asked: VerifyRequest
        if request.body.isEmpty {
            asked = VerifyRequest()
        } else if let body = try? ControlJSON.decode(VerifyRequest.self, from: request.body) {
            asked = body
        } else {
            return .error(400, "bad_request", "expected {\"deep\": PERCENT or null}")
        }
        if let deep = asked.deep, !(deep > 0 && deep <= 100) {
            return .error(400, "bad_request", "--deep takes a share of the objects from 0 (excluded) to 100 percent")
        }
        guard await account.isSignedIn else {
            audited(.verify, request, .refused, ["why": "not signed in"])
            return .error(409, "not_signed_in", "photolalad is not signed in, so there is no bucket to verify: run `photolalactl login`")
        }
        // The inventory records the verify it begins, and its result, as the caller's.
        return .json(await inventory.requestVerify(deepPercent: asked.deep, by: request.caller))
    }

    func verifyProgress() async -> ControlResponse {
        .json(await inventory.verifyProgress())
    }

    func files(_ request: ControlRequest) async -> ControlResponse {
        guard let asked = try? ControlJSON.decode(FilesRequest.self, from: request.body) else {
            return .error(400, "bad_request", "expected {\"path\": \"/absolute/path\", \"after\": null, \"limit\": N}")
        }
        let folders = await core.settings.watch.folders
        guard let path = WatchedPath.resolve(asked.path, folders: folders, realPath: Self.realPath) else {
            let list = folders.isEmpty ? "none is set" : folders.joined(separator: ", ")
            return .error(400, "outside", "\(asked.path) is not under a watched folder (\(list)): photolalad backs up only what is under watch.folders")
        }
        let limit = min(1000, max(1, asked.limit ?? 500))
        let records: [FileRecord]
        do {
            records = try database.files(at: path, after: asked.after, limit: limit)
        } catch {
            return .error(500, "internal", "cannot read the queue: \(error)")
        }
        let userId = await account.userId
        let items = records.map { r in
            FileListing.Item(path: r.path, state: r.state.publicName, size: r.size, md5: r.md5,
                             key: r.md5.flatMap { md5 in userId.map { "photos/\($0)/\(md5).dat" } },
                             uploadedAt: r.uploadedAt.map(Timestamp.string), lastError: r.state == .uploaded ? nil : r.lastError)
        }
        var note: String?
        if asked.after == nil && records.isEmpty { note = Self.untracked(path) }
        return .json(FileListing(items: items, next: records.count == limit ? records.last?.path : nil, note: note))
    }

    /// Why nothing is known at `path`, in words.
    static func untracked(_ path: String) -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            return "no such file or folder, and photolalad knows of nothing there"
        }
        if isDirectory.boolValue { return "no photo or video under this folder is known to photolalad yet (a scan may still be on its way)" }
        return "not backed up: photolalad does not track this file (not a photo or video by its extension, hidden, excluded by watch.exclude, or not seen yet)"
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
