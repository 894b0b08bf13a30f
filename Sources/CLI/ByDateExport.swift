import ArgumentParser
import Control
import PhotolalaCore
import RestoreCtl

/// `photolalactl restore --by-date --to DIR`: every photo and video of the account, named
/// by date (privacy.md "Export every photo of the account"); the rest of `restore`'s
/// options do not apply (`RestoreCommand.validate`).
enum ByDateExport {
    static func validate(_ c: RestoreCommand) throws {
        guard c.to != nil else { throw ValidationError("--by-date needs --to DIR: where every photo of the account is written") }
        let others = [c.device.map { _ in "--device" }, c.asOf.map { _ in "--as-of" }, c.overwrite ? "--overwrite" : nil,
                      c.numericOwner ? "--numeric-owner" : nil, c.noOwners ? "--no-owners" : nil, c.paths.isEmpty ? nil : "PATH"].compactMap { $0 }
        if !others.isEmpty {
            throw ValidationError("--by-date exports every photo of the account: it goes with --to, --dry-run and --json only, not \(others.joined(separator: ", "))")
        }
    }

    static func run(options: CtlOptions, to: String, dryRun: Bool, json: Bool, interrupt: InterruptFlag) async throws {
        let flag = interrupt.shared
        let summary: ExportSummary
        do {
            summary = try await ExportRun(client: options.client(), request: .init(to: to, dryRun: dryRun, json: json), interrupted: { flag.value }).run()
        } catch {
            switch error {
            case .control(let failure): throw CtlFailure.exit(failure)
            case .plan(let why):
                StandardError.print("photolalactl: \(why)")
                throw ExitCode(1)
            }
        }
        print(json ? String(decoding: (try? ControlJSON.encode(summary, pretty: true)) ?? [], as: UTF8.self) + "\n" : summary.text, terminator: "")
        withExtendedLifetime(interrupt) {}
        if summary.exitCode != 0 { throw ExitCode(summary.exitCode) }
    }
}
