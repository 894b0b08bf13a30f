import ArgumentParser
import Control
import Foundation
import PhotolalaCore
import RestoreCtl

/// `photolalactl devices [--json]`: this account's devices that have a manifest in the
/// bucket, read from the bucket (a new NAS signed in with the same Apple ID sees the old one).
struct DevicesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "The NAS devices of this account that have a manifest: name, id, last backup, files, bytes.",
        discussion: """
            Manifests are encrypted with the account's key: on a NAS that does not hold it yet, only \
            the ids and when each manifest last changed are shown, until the recovery key is entered \
            (sudo photolalactl recovery-key --enter). A device whose manifest does not open with this \
            account's key is named as such; one still in the old plaintext format is marked \
            "unencrypted" and restored only with --allow-unencrypted.
            """)
    @OptionGroup(title: "Global options") var options: CtlOptions
    @Flag(name: .long, help: "One JSON object {\"devices\": [...]}.") var json = false

    func run() throws {
        var client = options.client()
        client.timeout = 120
        let shown: String
        do {
            shown = try DeviceTable.text(asking: client, json: json)
        } catch {
            throw CtlFailure.exit(error)
        }
        print(shown, terminator: "")
    }
}
