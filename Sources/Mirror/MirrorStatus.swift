import Foundation
import PhotolalaCore

extension DaemonStatus.Mirror {
    /// status `mirror` of a mirror with a folder, from what the stage knows: `pulling` while
    /// it pulls or copies are in flight, the counts as last read from the queue database.
    init(folder: String, pause: MirrorPause.Reason?, pulling: Bool, counts c: MirrorCounts, rate: Double, lastPassAt: Date?,
         nextCheckAt: Date, lastError: String?) {
        self.init()
        self.folder = folder
        state = pause != nil ? .paused : pulling ? .pulling : .idle
        pauseReason = pause.map { DaemonStatus.Mirror.PauseReason(rawValue: $0.rawValue) ?? .folder }
        inAccount = c.inAccount
        present = c.present
        pending = c.pending
        pendingBytes = c.pendingBytes
        copied = c.copied
        adopted = c.adopted
        archived = c.archived
        thawing = c.thawing
        onlyHere = c.onlyHere
        removedHere = c.removedHere
        refused = c.refused
        refusedRepeatedly = c.refusedRepeatedly
        trashed = c.trashed
        self.rate = rate
        self.lastPassAt = lastPassAt.map(Timestamp.string)
        self.nextCheckAt = Timestamp.string(nextCheckAt)
        self.lastError = lastError
    }
}
