extension DaemonStatus {
    /// What needs the user now, one sentence each: the answer of `photolalactl status
    /// --check` (cli.md: exit 1 when this is not empty) and of `status --all`'s last column.
    /// It is what the human status asks the user to do: every "Action needed" item, a NAS
    /// not signed in yet (a new container is not healthy until someone signs it in), each
    /// "Problem:" line, and files given up on. Not the user's own pause, nor a bandwidth
    /// timetable's: the user chose those.
    package var userNeeds: [String] {
        var out = attention.map(\.sentence)
        if state == .needsLogin && !attention.contains(where: { $0.reason == .notSignedIn }) {
            if let pairing {
                out.append("Pairing: confirm the code \(pairing.userCode) on your phone.")
            } else {
                out.append("Not signed in yet: run `\(ctl) login`.")
            }
        }
        let said = Set(out.map { $0.lowercased() })
        out += problems.filter { p in !said.contains(where: { $0.contains(p.lowercased()) }) }
        if queue.failed > 0 {
            out.append("\(queue.failed) file\(queue.failed == 1 ? "" : "s") could not be backed up: `\(ctl) queue --failed` says why, `\(ctl) retry` tries again.")
        }
        return out
    }
}
