import Control
import Foundation
import Restore

/// The calls of `photolalactl devices` and `restore`, answered by the restore service.
extension DaemonControl {
    func restoring(_ request: ControlRequest) async -> ControlResponse {
        switch request.route {
        case .devices:
            return await restore.devices()
        case .manifest:
            return await restore.manifest(device: request.query["device"] ?? "")
        case .restoreObjects, .restoreThaw:
            guard let query = try? ControlJSON.decode(ObjectQuery.self, from: request.body) else {
                return .error(400, "bad_request", "expected {\"md5s\": [...]}")
            }
            return await restore.objects(query, thaw: request.route == .restoreThaw)
        case .restoreListing:
            return await restore.listing()
        case .restoreObject:
            return await restore.object(md5: request.query["md5"] ?? "", expectedSize: request.query["size"].flatMap { Int64($0) })
        case .restoreSession:
            guard let report = try? ControlJSON.decode(RestoreReport.self, from: request.body) else {
                return .error(400, "bad_request", "expected a restore report")
            }
            let id = await restore.report(report)
            core.changed()
            return .json(RestoreSessionReply(id: id))
        default:
            return .error(404, "not_found", "not a restore call")
        }
    }
}
