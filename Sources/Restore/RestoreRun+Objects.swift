import Control
import Foundation

/// Where the objects of a restore stand before any is read: from the bucket's listing when
/// the restore wants a good part of the bucket (a request per 1,000 objects), otherwise
/// with a HEAD per object; objects in an archive class are then asked after (and, for a
/// real run, asked back) one by one.
extension RestoreRun {
    /// `bucketEstimate`: the files the account's devices hold, an upper bound of the objects.
    func objectStatuses(_ md5s: Set<String>, thaw: Bool, bucketEstimate: Int64) throws(Stop) -> [String: ObjectStatus] {
        guard !md5s.isEmpty else { return [:] }
        guard ObjectListing.worthListing(wanted: md5s.count, bucketEstimate: bucketEstimate) else {
            return try objectStatuses(md5s, thaw: thaw)
        }
        var listing = ObjectListing(wanted: md5s)
        var streaming = client
        streaming.timeout = 300
        let answer: ControlClient.StreamAnswer
        do {
            answer = try streaming.stream(.restoreListing) { try listing.feed($0) }
        } catch let failure as ControlClient.Failure {
            throw .control(failure)
        } catch {
            throw .plan("the bucket's listing could not be read: \(error)")
        }
        guard (200..<300).contains(answer.status) else {
            throw .plan(answer.errorMessage ?? "the bucket's listing could not be read (HTTP \(answer.status))")
        }
        guard answer.complete, listing.ended else { throw .plan("the bucket's listing arrived cut short; run the command again") }
        var out = listing.statuses
        let archived = Set(out.values.filter { $0.state == .archived }.map(\.md5))
        if !archived.isEmpty {
            for (md5, status) in try objectStatuses(archived, thaw: thaw) { out[md5] = status }
        }
        return out
    }

    /// Where each object stands, HEADs a batch at a time; `thaw` asks archived ones back.
    func objectStatuses(_ md5s: Set<String>, thaw: Bool) throws(Stop) -> [String: ObjectStatus] {
        var out: [String: ObjectStatus] = [:]
        let all = md5s.sorted()
        var start = 0
        var streaming = client
        streaming.timeout = 300
        while start < all.count {
            let batch = Array(all[start..<min(all.count, start + ObjectQuery.maxBatch)])
            start += batch.count
            do {
                let list = try streaming.call(thaw ? .restoreThaw : .restoreObjects, body: try ControlJSON.encode(ObjectQuery(md5s: batch)),
                                              as: ObjectStatusList.self)
                for s in list.objects { out[s.md5] = s }
            } catch let failure as ControlClient.Failure {
                throw .control(failure)
            } catch {
                throw .plan("\(error)")
            }
        }
        return out
    }
}
