/// CLI: the command line: photolalad (the daemon) and photolalactl (the control client), chosen by program name.
import ArgumentParser
import Foundation
import Previews

/// One binary, two faces: called `photolalactl` (the packaged symlink) it is the CLI;
/// `photolalad ctl ARGS…` is the same for development; otherwise it is the daemon.
package enum Entry {
    package enum Face: Equatable {
        case ctl([String])
        case daemon([String])
        /// The sandboxed preview worker the daemon starts (never typed by people).
        case previewWorker([String])
    }

    package static func main() async {
        switch face(of: CommandLine.arguments) {
        case .ctl(let arguments): await Ctl.main(arguments)
        case .daemon(let arguments): await DaemonCommand.main(arguments)
        case .previewWorker(let arguments): PreviewWorker.main(arguments)
        }
    }

    /// Which face a command line asks for, and the arguments that face parses.
    package static func face(of args: [String]) -> Face {
        let program = (args.first.map { ($0 as NSString).lastPathComponent }) ?? "photolalad"
        if program.hasPrefix("photolalactl") { return .ctl(Array(args.dropFirst())) }
        if args.count > 1, args[1] == "ctl" { return .ctl(Array(args.dropFirst(2))) }
        if args.count > 1, args[1] == PreviewWorker.subcommand { return .previewWorker(Array(args.dropFirst())) }
        return .daemon(Array(args.dropFirst()))
    }
}
