import Foundation
import PhotolalaCore

/// What `photolalad --check-config` says about one instance's settings beside the other
/// instances' (config.md "Instances"): warnings, never errors, because each file is valid
/// on its own; but a folder two accounts watch has its photos in both, and two instances
/// on one database, socket or port get in each other's way.
package enum InstanceChecks {
    /// An instance's settings as read from its file.
    package struct Peer: Sendable {
        package var instance: Instance?
        package var path: String
        package var settings: Settings
        package init(instance: Instance?, path: String, settings: Settings) {
            self.instance = instance
            self.path = path
            self.settings = settings
        }

        /// "instance bob (/etc/photolala/bob.toml)", "photolalad.service (/etc/photolala/photolalad.toml)".
        package var label: String {
            (instance.map { "instance \($0.name)" } ?? "photolalad.service") + " (\(path))"
        }
    }

    /// One line per clash between `this` and each of `others`.
    package static func warnings(_ this: Peer, others: [Peer]) -> [String] {
        var out: [String] = []
        for other in others where other.path != this.path {
            for mine in this.settings.watch.folders {
                for theirs in other.settings.watch.folders {
                    guard let relation = relation(mine, theirs) else { continue }
                    out.append("\(other.label) \(relation) \(mine): "
                               + "its photos would be backed up to both accounts (watch only one account's folders in each instance)")
                }
            }
            if this.settings.daemon.stateDir == other.settings.daemon.stateDir {
                out.append("\(other.label) keeps its state in \(this.settings.daemon.stateDir) too: "
                           + "two daemons on one queue database (set daemon.state_dir apart)")
            }
            if this.settings.daemon.socket == other.settings.daemon.socket {
                out.append("\(other.label) listens on \(this.settings.daemon.socket) too: only one of them can start (set daemon.socket apart)")
            }
            if let a = this.settings.metrics.listen, let b = other.settings.metrics.listen, sameListener(a, b) {
                out.append("\(other.label) serves metrics on \(b) too: only one of them can (set metrics.listen apart)")
            }
            if let a = this.settings.web.listen, let b = other.settings.web.listen, sameListener(a, b) {
                out.append("\(other.label) serves its status page on \(b) too: only one of them can "
                           + "(set web.listen apart, e.g. \"\(a.host):\(freeWebPort(besides: [this] + others))\", or \"off\")")
            }
        }
        return out
    }

    /// A port of the instances' range that no instance here serves its page on, to suggest.
    static func freeWebPort(besides peers: [Peer]) -> Int {
        let taken = Set(peers.compactMap { $0.settings.web.listen?.port })
        let range = Instance.firstWebPort..<(Instance.firstWebPort + Instance.webPorts)
        return range.first { !taken.contains($0) } ?? range.upperBound
    }

    /// How the other instance's `theirs` relates to this one's `mine`, as the middle of a
    /// sentence; nil when neither folder holds the other.
    static func relation(_ mine: String, _ theirs: String) -> String? {
        if mine == theirs { return "also watches" }
        if contains(mine, theirs) { return "watches \(theirs), inside" }
        if contains(theirs, mine) { return "watches \(theirs), which holds" }
        return nil
    }

    /// Whether `outer` is a folder above `inner` (both normalized, absolute).
    static func contains(_ outer: String, _ inner: String) -> Bool {
        outer == "/" ? inner != "/" : inner.hasPrefix(outer + "/")
    }

    /// Two addresses that cannot both be bound: the same port on the same host, or on a
    /// wildcard and anything.
    static func sameListener(_ a: Settings.ListenAddress, _ b: Settings.ListenAddress) -> Bool {
        guard a.port == b.port else { return false }
        let wildcard: Set<String> = ["0.0.0.0", "::", "*"]
        return a.host == b.host || wildcard.contains(a.host) || wildcard.contains(b.host)
    }

    /// Every instance's config in `directory` but `this` one's, read leniently: a file that
    /// does not load is a line of its own (it is checked when its own daemon starts).
    package static func peers(in directory: String = Instance.configDirectory, excluding path: String) -> (peers: [Peer], unreadable: [String]) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return ([], []) }
        var peers: [Peer] = []
        var unreadable: [String] = []
        let mine = URL(fileURLWithPath: path).standardizedFileURL.path
        for name in names.sorted() {
            guard let owner = Instance.owning(fileName: name), case .success(let instance) = owner else { continue }
            let file = directory + "/" + name
            if URL(fileURLWithPath: file).standardizedFileURL.path == mine { continue }
            do {
                peers.append(Peer(instance: instance, path: file, settings: try ConfigLoader.load(path: file, instance: instance)))
            } catch {
                // A file that watches no folder yet (the shipped photolalad.toml on a NAS that
                // uses only instances) is not set up: its daemon cannot start, so it shares
                // nothing with this one, and saying so on every check would only be noise.
                if error.problems.allSatisfy({ $0.key == "watch.folders" && $0.value == "[]" }) { continue }
                unreadable.append("\(file) could not be compared with this one: \(error.problems.first.map { "\($0)" } ?? "invalid")")
            }
        }
        return (peers, unreadable)
    }
}
