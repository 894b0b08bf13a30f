import CLinux
import Foundation
import PhotolalaCore

/// Keeping the stage healthy: putting back what the queue could not record, and giving
/// memory back after a burst.
extension IngestService {
    func writeFailed() {
        lostWrites = true
        guard recovery == nil else { return }
        recovery = Task { await self.recover() }
    }

    /// Rescans every folder after a failed write (`recoveryBackoff`: 5 s, 10 s, … up to 5
    /// minutes apart) until a whole rescan records without an error. Scans re-read nothing
    /// already hashed, so a long outage costs listings, not hashing.
    private func recover() async {
        var backoff = Self.recoveryBackoff
        var delay = backoff.fail(random: 0)
        while !Task.isCancelled {
            try? await Task.sleep(for: Backoff.duration(delay))
            if Task.isCancelled { break }
            lostWrites = false
            rescanAll(reason: "putting back what the queue could not record")
            while scans.isBusy && !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
            }
            if !lostWrites {
                logger.notice("the queue records changes again; nothing was missed")
                break
            }
            delay = backoff.fail(random: 0)
        }
        recovery = nil
    }

    private var isIdle: Bool {
        hashes.isDrained && hashes.backlogCursor == nil && hashing == 0 && hashed.isEmpty && !scans.isBusy
    }

    /// After a burst of work (a first scan queues and hashes a hundred thousand files),
    /// the heap keeps what the burst freed and SQLite keeps its page caches: 10 to 15 MB
    /// the daemon no longer needs. Two seconds after the work runs out, give it back.
    func noteMaybeIdle() {
        guard workSinceRelease, isIdle, !idleCheckScheduled else { return }
        idleCheckScheduled = true
        Task {
            try? await Task.sleep(for: .seconds(2))
            await self.releaseMemoryIfStillIdle()
        }
    }

    private func releaseMemoryIfStillIdle() {
        idleCheckScheduled = false
        // Busy again: the next time the work runs out does it.
        guard isIdle else { return }
        workSinceRelease = false
        hashes.releaseMemory()
        hashed = []
        database.releaseMemory()
        photolala_trim_malloc()
        photolala_release_code_pages()
    }
}
