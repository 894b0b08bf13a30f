#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import Control
import Foundation
import PhotolalaCore

/// `photolalactl verify [--deep PERCENT] [--json]`: the daemon lists the bucket and
/// compares every backed-up object with it (presence, size, ETag), optionally reads a
/// share back; the command shows its progress and the result. Exit 0 when every object
/// was proved, 1 when any was missing or wrong (they are queued again) or it failed.
package struct VerifyCommand: ParsableCommand {
    package init() {}
    package static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Prove that every backed-up file's object is in the bucket with the right bytes.",
        discussion: """
            Lists the bucket and checks each object this NAS backed up: there, of its size, and with the ETag \
            its bytes give (the MD5 of a single upload, the MD5 of the parts' MD5s for a multipart one). \
            Anything missing or wrong is queued to be sent again. --deep also reads that share of the objects \
            back and checks each one's MD5 against its key; it is the only proof on a bucket with SSE-KMS.
            """)
    @OptionGroup(title: "Global options") package var options: CtlOptions
    @Option(name: .long, help: ArgumentHelp("Also read back this share of the objects (at least one) and check their MD5s.",
                                            valueName: "percent"))
    package var deep: Double?
    @Flag(name: .long, help: "The result as one JSON object (the verify fields of status, and the progress).") package var json = false

    package func validate() throws {
        if let deep, !(deep > 0 && deep <= 100) {
            throw ValidationError("--deep takes a percentage above 0 and at most 100, e.g. --deep 5")
        }
    }

    package func run() throws {
        let client = options.client()
        var progress: VerifyProgress
        do {
            let (status, reply) = try client.send(.verify, body: try ControlJSON.encode(VerifyRequest(deep: deep)))
            guard status == 200, let started = try? ControlJSON.decode(VerifyProgress.self, from: reply) else {
                throw Self.refusal(status: status, reply: reply, groupHint: client.groupHint)
            }
            progress = started
            let interrupted = InterruptFlag()
            let live = !json && isatty(2) != 0
            while !progress.isFinished {
                if interrupted.isSet {
                    if live { StandardError.write("\n") }
                    StandardError.print("photolalactl: verify goes on in photolalad; `photolalactl status` shows its result")
                    throw ExitCode(130)
                }
                usleep(250_000)
                progress = try client.call(.verifyProgress, as: VerifyProgress.self)
                if live { StandardError.write("\r\u{1B}[K" + Self.progressLine(progress)) }
            }
            if live { StandardError.write("\r\u{1B}[K") }
        } catch let failure as ControlClient.Failure {
            throw CtlFailure.exit(failure)
        }
        if progress.phase == .failed && !json {
            StandardError.print("photolalactl: verify failed: \(progress.result.lastError ?? "see the log (journalctl -u photolalad)")")
            throw ExitCode(1)
        }
        print(Self.render(progress, json: json), terminator: "")
        let r = progress.result
        if progress.phase == .failed || r.missing + r.mismatched > 0 { throw ExitCode(1) }
    }

    /// A refusal in one line: the daemon's words, with cli.md's exit code.
    static func refusal(status: Int, reply: [UInt8], groupHint: String) -> Error {
        let message = (try? ControlJSON.decode(ControlReply.self, from: reply))?.message
        if status == 403 { return ControlClient.Failure.permissionDenied(hint: message ?? "permission denied: join the group '\(groupHint)'") }
        StandardError.print("photolalactl: \(message ?? "unexpected answer from photolalad (HTTP \(status))")")
        return ExitCode(1)
    }

    package static func progressLine(_ p: VerifyProgress) -> String {
        switch p.phase {
        case .queued: "waiting for the listing under way to end…"
        case .listing: "listing the bucket: \(p.done) objects so far…"
        case .comparing: "comparing: \(p.done) of \(p.total ?? 0) objects…"
        case .readingBack: "reading back: \(p.done) of \(p.total ?? 0) objects…"
        case .idle, .done, .failed: ""
        }
    }

    package static func render(_ p: VerifyProgress, json: Bool) -> String {
        if json {
            return String(decoding: (try? ControlJSON.encode(p.result, pretty: true)) ?? [], as: UTF8.self) + "\n"
        }
        let r = p.result
        var lines: [String] = []
        let problems = r.missing + r.mismatched
        let listed = r.lastError == nil || r.checked > 0
        if listed {
            let what = "Checked \(r.checked) object\(r.checked == 1 ? "" : "s") against a fresh listing of the bucket"
            if problems == 0 && r.readBackWrong == 0 {
                lines.append(r.unproven == r.checked && r.checked > 0
                    ? "\(what): every one is there with its size."
                    : "\(what): every one is there with its size" + (r.unproven > 0 ? "" : " and the ETag of its bytes") + ".")
            } else {
                lines.append("\(what):")
                lines.append("  missing             \(r.missing)")
                lines.append("  of the wrong size   \(r.wrongSize)")
                lines.append("  other bytes (ETag)  \(r.wrongETag)")
                if r.deepPercent != nil { lines.append("  other bytes (read)  \(r.readBackWrong)") }
            }
        }
        if let deep = r.deepPercent {
            let share = deep == deep.rounded() ? "\(Int(deep))%" : "\(deep)%"
            lines.append("Read back \(r.readBack) object\(r.readBack == 1 ? "" : "s") (--deep \(share)): "
                         + (r.readBackWrong == 0 ? "every one's MD5 matches its key." : "\(r.readBackWrong) with other bytes than their key names."))
        }
        if r.sseKms {
            lines.append("This bucket encrypts with SSE-KMS: its ETags are not MD5s, so they prove nothing about the bytes.")
            lines.append("Run `photolalactl verify --deep 100` to read every object back and check it.")
        } else if r.unproven > 0 {
            lines.append("\(r.unproven) object\(r.unproven == 1 ? " was" : "s were") uploaded in parts by another tool: "
                         + "\(r.unproven == 1 ? "its ETag proves" : "their ETags prove") only the size; `--deep` reads them back.")
        }
        if problems > 0 {
            lines.append("\(r.requeued) object\(r.requeued == 1 ? "" : "s") queued to be sent again; `photolalactl status` shows the progress.")
        }
        if r.lost > 0 {
            lines.append("\(r.lost) of them cannot be sent again: no file on this NAS holds those bytes any more.")
        }
        if let e = r.lastError { lines.append("Note: \(e)") }
        return lines.joined(separator: "\n") + "\n"
    }
}
