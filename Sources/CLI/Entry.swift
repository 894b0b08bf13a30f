/// CLI: the command line: photolalad (the daemon) and photolalactl (the control client), chosen by program name.
import ArgumentParser
import Foundation

/// One binary, two faces: called `photolalactl` (the packaged symlink) it is the CLI;
/// `photolalad ctl ARGS…` is the same for development; otherwise it is the daemon.
public enum Entry {
    public static func main() async {
        let args = CommandLine.arguments
        let program = (args.first.map { ($0 as NSString).lastPathComponent }) ?? "photolalad"
        if program.hasPrefix("photolalactl") {
            Ctl.main(Array(args.dropFirst()))
        } else if args.count > 1, args[1] == "ctl" {
            Ctl.main(Array(args.dropFirst(2)))
        } else {
            await DaemonCommand.main(Array(args.dropFirst()))
        }
    }
}
