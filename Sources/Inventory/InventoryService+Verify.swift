import Foundation
import PhotolalaCore
import Queue

/// `photolalactl verify`: a fresh listing compared with every object the daemon holds as
/// backed up (presence, size, ETag), then with `--deep` a share of them read back. What
/// is missing or wrong goes back in the queue; the result and its time go into status.
extension InventoryService {
    func runVerify(userId: String, deepPercent: Double?) async {
        passRunning = true
        defer { passRunning = false }
        let startedAt = Date()
        var result = DaemonStatus.Verify(running: true, deepPercent: deepPercent)
        verify.phase = .listing
        verify.done = 0
        verify.result = result
        statusChanges.changed()
        let deep = deepPercent.map { ", then reading back \(Self.percent($0)) of the objects" } ?? ""
        logger.notice("verify: listing the bucket\(deep)")

        let outcome = await listPrefix(Self.photosPrefix(userId), userId: userId, matchObjects: true)
        switch outcome {
        case .complete(let startedAt):
            verify.phase = .comparing
            verify.done = 0
            verify.total = try? database.uploadedObjectCount()
            do {
                try await compareUploaded(userId: userId, listingStartedAt: startedAt, checkETags: true, into: &result)
            } catch {
                return finishVerify(failure: "cannot read the queue database: \(error)", partial: result)
            }
            await listPrefix(Self.thumbnailsPrefix(userId), userId: userId, matchObjects: false)
        case .refused(let why):
            // Without a listing nothing proves presence by itself, but reading back still does.
            guard deepPercent != nil else {
                return finishVerify(failure: "\(why). verify needs to list the bucket; `photolalactl verify --deep PERCENT` reads objects back instead",
                                    partial: result)
            }
            result.lastError = "\(why): only the objects read back were checked"
        case .failed(let why):
            return finishVerify(failure: why, partial: result)
        case .interrupted:
            return finishVerify(failure: "verify was interrupted (photolalad signed out, paused by the account, or stopping)", partial: result)
        }

        if let deepPercent {
            await readBack(userId: userId, percent: deepPercent, verifyStartedAt: startedAt, into: &result)
        }
        result.running = false
        result.checkedAt = Timestamp.string(Date())
        verify.phase = .done
        verify.result = result
        keep(result)
        logger.notice("verify done", metadata: [
            "checked": "\(result.checked)", "missing": "\(result.missing)", "wrongSize": "\(result.wrongSize)",
            "wrongETag": "\(result.wrongETag)", "unproven": "\(result.unproven)", "readBack": "\(result.readBack)",
            "readBackWrong": "\(result.readBackWrong)", "queued": "\(result.requeued)", "sseKms": "\(result.sseKms)"])
        statusChanges.changed()
    }

    /// Ends the verify under way (or one asked for that cannot begin) as failed, keeping
    /// what it found so far.
    func finishVerify(failure: String, partial: DaemonStatus.Verify? = nil) {
        verifyAsked = nil
        var result = partial ?? verify.result
        result.running = false
        result.lastError = failure
        result.checkedAt = Timestamp.string(Date())
        verify.phase = .failed
        verify.result = result
        keep(result)
        logger.warning("verify failed: \(failure)")
        statusChanges.changed()
    }

    /// The result survives a restart in the queue's `setting` table.
    private func keep(_ result: DaemonStatus.Verify) {
        if let data = try? JSONEncoder().encode(result) {
            try? database.setSetting(Self.lastVerifyKey, String(decoding: data, as: UTF8.self))
        }
    }

    static func percent(_ p: Double) -> String {
        p == p.rounded() ? "\(Int(p))%" : String(format: "%.2g%%", p)
    }
}
