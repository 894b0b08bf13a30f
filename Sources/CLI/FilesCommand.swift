import ArgumentParser
import Control
import Foundation
import PhotolalaCore

/// `photolalactl files [PATH…] [--json]`: "is this backed up?" for files and folders under
/// the watched folders, a page at a time (a folder of a million photos streams, it is not
/// held in memory by the daemon or the command). Exit 1 if a path is outside every
/// watched folder (one line says so); the others are still answered.
package struct FilesCommand: ParsableCommand {
    package init() {}
    package static let configuration = CommandConfiguration(
        commandName: "files",
        abstract: "Is this backed up? Each file's state, MD5, object key and when it went up.")
    @OptionGroup(title: "Global options") package var options: CtlOptions
    @Argument(help: ArgumentHelp("Files or folders under a watched folder (default: the current folder).", valueName: "path"))
    package var paths: [String] = []
    @Flag(name: .long, help: "One JSON object {\"items\": [...]} (and \"notes\" for paths nothing is known of).") package var json = false

    package func run() throws {
        let client = options.client()
        let asked = (paths.isEmpty ? ["."] : paths).map(Self.absolute)
        var tally = Tally()
        var notes: [(String, String)] = []
        var refused = false
        var first = true
        if json { print("{\"items\": [", terminator: "") }
        do {
            for path in asked {
                var after: String?
                repeat {
                    let body = try ControlJSON.encode(FilesRequest(path: path, after: after, limit: 500))
                    let (status, reply) = try client.send(.files, body: body)
                    guard status == 200, let page = try? ControlJSON.decode(FileListing.self, from: reply) else {
                        if status == 400 {
                            StandardError.print("photolalactl: \((try? ControlJSON.decode(ControlReply.self, from: reply))?.message ?? "cannot list \(path)")")
                            refused = true
                            break
                        }
                        throw VerifyCommand.refusal(status: status, reply: reply, groupHint: client.groupHint)
                    }
                    if let note = page.note { notes.append((path, note)) }
                    if json {
                        for item in page.items {
                            print((first ? "\n  " : ",\n  ") + Self.jsonLine(item), terminator: "")
                            first = false
                        }
                    } else if asked.count == 1, after == nil, page.next == nil, page.items.count == 1, page.items[0].path == path {
                        print(Self.block(page.items[0]), terminator: "")
                        tally.single = true
                    } else {
                        if tally.files == 0 && !page.items.isEmpty { print(Self.header) }
                        print(page.items.map(Self.row).joined(), terminator: "")
                    }
                    page.items.forEach { tally.add($0) }
                    after = page.next
                } while after != nil
            }
        } catch let failure as ControlClient.Failure {
            throw CtlFailure.exit(failure)
        }
        if json {
            let rendered = notes.map { "{\"path\": \(Self.quoted($0.0)), \"note\": \(Self.quoted($0.1))}" }
            print((first ? "" : "\n") + "], \"notes\": [" + rendered.joined(separator: ", ") + "]}")
        } else {
            for (path, note) in notes { print("\(path): \(note)") }
            if !tally.single && tally.files > 0 { print(tally.summary) }
        }
        if refused { throw ExitCode(1) }
    }

    /// What the daemon needs: an absolute path without `.` or `..` (symlinks are left to it).
    package static func absolute(_ path: String) -> String {
        let base = FileManager.default.currentDirectoryPath
        let full = path.hasPrefix("/") ? path : base + "/" + path
        return URL(fileURLWithPath: full).standardizedFileURL.path
    }

    static let header = "STATE      SIZE       WENT UP              MD5                               PATH"

    package static func row(_ i: FileListing.Item) -> String {
        let state = i.state.padding(toLength: 10, withPad: " ", startingAt: 0)
        let size = Units.humanBytes(i.size).padding(toLength: 10, withPad: " ", startingAt: 0)
        let when = (i.uploadedAt.map(shortTime) ?? "-").padding(toLength: 20, withPad: " ", startingAt: 0)
        let md5 = (i.md5 ?? "-").padding(toLength: 33, withPad: " ", startingAt: 0)
        let why = i.lastError.map { " — \($0)" } ?? ""
        return "\(state) \(size) \(when) \(md5) \(i.path)\(why)\n"
    }

    /// One file asked about by name: everything, one line each.
    package static func block(_ i: FileListing.Item) -> String {
        var lines = [i.path]
        let words: String = switch i.state {
        case "uploaded": "backed up"
        case "pending": "not yet backed up: waiting to be read or sent"
        case "uploading": "being sent now"
        case "failed": "not backed up: gave up (`photolalactl retry` tries again)"
        case "gone": "deleted from the folder since (its object stays in the bucket)"
        default: i.state
        }
        lines.append("  state       \(i.state) — \(words)")
        lines.append("  size        \(Units.humanBytes(i.size)) (\(i.size) bytes)")
        lines.append("  md5         \(i.md5 ?? "not read yet")")
        lines.append("  key         \(i.key ?? "-")")
        lines.append("  went up     \(i.uploadedAt ?? "-")")
        if let e = i.lastError { lines.append("  last error  \(e)") }
        return lines.joined(separator: "\n") + "\n"
    }

    static func shortTime(_ iso: String) -> String {
        // 2026-11-22T07:10:00Z → 2026-11-22 07:10 UTC
        guard iso.count >= 16 else { return iso }
        return String(iso.prefix(10)) + " " + String(iso.dropFirst(11).prefix(5)) + " UTC"
    }

    package static func jsonLine(_ item: FileListing.Item) -> String {
        String(decoding: (try? ControlJSON.encode(item)) ?? Array("{}".utf8), as: UTF8.self)
    }

    package static func quoted(_ s: String) -> String {
        let bytes: [UInt8] = (try? ControlJSON.encode([s])) ?? Array("[\"\"]".utf8)
        return String(decoding: bytes.dropFirst().dropLast(), as: UTF8.self)
    }

    /// Counts by state for the closing line.
    package struct Tally {
        var files = 0
        var single = false
        var byState: [String: Int] = [:]

        mutating func add(_ item: FileListing.Item) {
            files += 1
            byState[item.state, default: 0] += 1
        }

        var summary: String {
            let order = ["uploaded", "pending", "uploading", "failed", "gone"]
            let parts = order.compactMap { s in byState[s].map { "\($0) \(s)" } }
            return "\(files) file\(files == 1 ? "" : "s"): " + parts.joined(separator: ", ")
        }
    }
}
