/// What to do about what already stands at a file's destination (cli.md): nothing there,
/// write it; a file with the same bytes, leave it (a re-run resumes); anything else is
/// kept and reported unless `--overwrite`, except a folder or anything that is not a file
/// or a link (a FIFO, a device), which is never replaced.
package enum ConflictRule {
    package enum Existing: Sendable, Equatable {
        case nothing
        case file(size: Int64)
        case folder
        case link
        /// A FIFO, a socket, a device…: looked at, never opened; says which.
        case other(String)
    }

    package enum Decision: Sendable, Equatable {
        case write
        /// Same size: read it to see whether it holds the same bytes.
        case compare
        case alreadyThere
        case replace
        case keep(String)
    }

    package static func decide(_ existing: Existing, size: Int64, overwrite: Bool) -> Decision {
        switch existing {
        case .nothing: return .write
        case .file(let s) where s == size: return .compare
        case .file(let s): return overwrite ? .replace : .keep("a different file (\(s) bytes) is there; --overwrite replaces it")
        case .link: return overwrite ? .replace : .keep("a symbolic link is there; --overwrite replaces it")
        case .folder: return .keep("a folder is there")
        case .other(let what): return .keep("\(what) is there: left alone, not opened")
        }
    }

    /// After reading a same-size file.
    package static func compared(sameBytes: Bool, overwrite: Bool) -> Decision {
        if sameBytes { return .alreadyThere }
        return overwrite ? .replace : .keep("a different file of the same size is there; --overwrite replaces it")
    }
}
