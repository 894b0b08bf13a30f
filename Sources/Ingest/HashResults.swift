import Digests

/// A batch of hasher results, taken in arrival order as runs of digests (recorded in one
/// transaction each) broken by failures (recorded one by one, after the digests before
/// them: a failure for a path is applied after its earlier successes).
struct HashResults {
    enum Step {
        case digests([HashedFile], [FileDigest])
        case failure(String, FileHasher.Failure)
    }

    private let results: [(String, HasherPool.Result)]
    private var index = 0

    init(_ results: [(String, HasherPool.Result)]) {
        self.results = results
    }

    /// Every path in the batch, recorded or not.
    var paths: [String] { results.map(\.0) }

    mutating func next() -> Step? {
        guard index < results.count else { return nil }
        if case .failure(let failure) = results[index].1 {
            defer { index += 1 }
            return .failure(results[index].0, failure)
        }
        var files: [HashedFile] = []
        var digests: [FileDigest] = []
        while index < results.count, case .success(let digest) = results[index].1 {
            files.append(HashedFile(path: results[index].0, identity: digest.identity, md5: digest.md5,
                                    sha256: digest.sha256.flatMap { Hex.bytes($0) }, owner: digest.owner))
            digests.append(digest)
            index += 1
        }
        return .digests(files, digests)
    }
}
