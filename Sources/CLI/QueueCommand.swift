import ArgumentParser
import Control
import Foundation
import PhotolalaCore

/// `photolalactl queue [--failed] [--limit N] [--json]`: one line a file, with why it waits.
package struct QueueCommand: ParsableCommand {
    package init() {}
    package static let configuration = CommandConfiguration(commandName: "queue", abstract: "Files waiting, uploading or failed, with why.")
    @OptionGroup(title: "Global options") package var options: CtlOptions
    @Flag(name: .long, help: "Only failed files.") package var failed = false
    @Option(name: .long, help: "At most this many files (newest first).") package var limit = 100
    @Flag(name: .long, help: "One JSON object {\"items\": [...], \"total\": N}.") package var json = false

    package func validate() throws {
        guard limit > 0 else { throw ValidationError("--limit must be at least 1") }
    }

    package func run() throws {
        let listing: QueueListing
        do {
            var query = ["limit": "\(limit)"]
            if failed { query["failed"] = "1" }
            listing = try options.client().call(.queue, query: query, as: QueueListing.self)
        } catch {
            throw CtlFailure.exit(error)
        }
        print(Self.render(listing, failedOnly: failed, json: json), terminator: "")
    }

    package static func render(_ listing: QueueListing, failedOnly: Bool, json: Bool) -> String {
        if json {
            return String(decoding: (try? ControlJSON.encode(listing, pretty: true)) ?? [], as: UTF8.self) + "\n"
        }
        if listing.items.isEmpty {
            return (failedOnly ? "No failed files." : "Nothing waiting: every file is backed up.") + "\n"
        }
        var lines = listing.items.map { item in
            let why = item.lastError.map { " — \($0)" } ?? ""
            return "\(item.state.padding(toLength: 9, withPad: " ", startingAt: 0)) \(Units.humanBytes(item.size).padding(toLength: 9, withPad: " ", startingAt: 0)) \(item.path)\(why)"
        }
        if listing.total > listing.items.count {
            lines.append("… \(listing.total - listing.items.count) more (--limit)")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
