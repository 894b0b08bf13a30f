/// Upload: the uploader pool: claims objects from the queue and sends them to S3 with fresh credentials, within the bandwidth limit.
import Dispatch

/// Runs blocking file reads on a utility queue, off Swift's small cooperative pool.
enum BlockingIO {
    static let queue = DispatchQueue(label: "photolala.upload.io", qos: .utility, attributes: .concurrent)

    static func run<T: Sendable, E: Error>(_ work: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { c in
            queue.async {
                do throws(E) { c.resume(returning: .success(try work())) } catch { c.resume(returning: .failure(error)) }
            }
        }
        return try result.get()
    }
}
