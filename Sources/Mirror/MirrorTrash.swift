import Foundation
import Logging
import PhotolalaCore
import Queue

/// What the account lost, in the mirror's folder (mirror.md): copies moved into `.trash/`,
/// each entry marked gone. Through the stage's database.
struct MirrorTrash: Sendable {
    let database: QueueDatabase
    let folder: String
    let dirMode: UInt32
    let owner: (uid: UInt32, gid: UInt32)?
    let clock: any DaemonClock
    let logger: Logger
    let audit: (any AuditRecorder)?

    /// Moves copies the account lost into `.trash/`, unless that many at once looks like a
    /// listing gone wrong (`TrashGuard`): then they stay, counted as only on this NAS.
    /// Answers the last problem met (nil: none).
    func run(_ entries: [MirrorEntry]) async -> String? {
        let now = clock.now()
        let present = ((try? await database.mirrorCounts()) ?? MirrorCounts()).present
        guard TrashGuard.allows(trashing: entries.count, present: present) else {
            let why = "\(entries.count) copies would move into \(MirrorNaming.trashFolder)/ at once, more than half of the \(present) here: nothing was moved; they stay, counted as only on this NAS (the next full listing decides again)"
            logger.warning("\(why)")
            try? await database.applyMirror(saving: entries.map { var e = $0; e.gone = true; return e }, forgetting: [], now: now)
            return why
        }
        let paths = MirrorPaths(root: folder)
        var problem: String?
        var moved = 0
        var saving: [MirrorEntry] = []
        for entry in entries {
            var e = entry
            e.gone = true
            guard let path = entry.path else { continue }
            var done = false
            for n in 1...MirrorNaming.maxCandidates {
                let to = MirrorNaming.trash(path, attempt: n)
                do {
                    if try paths.move(path, to: to, dirMode: dirMode, owner: owner) {
                        e.state = .trashed
                        e.path = to
                        done = true
                        break
                    }
                } catch {
                    // Not there any more (removed here): nothing to move.
                    e.state = paths.identity(of: path) == nil ? .removed : e.state
                    problem = error.description
                    break
                }
            }
            if done { moved += 1 }
            saving.append(e)
        }
        try? await database.applyMirror(saving: saving, forgetting: [], now: now)
        if moved > 0 {
            logger.notice("the account lost objects the mirror had: their copies moved into \(MirrorNaming.trashFolder)/", metadata: ["count": "\(moved)"])
            audit?.record(AuditEvent(.mirrorTrash, by: .daemon, .ok, ["count": .int(Int64(moved)), "folder": .string(folder)]))
        }
        return problem
    }
}
