/// One of several daemons on a NAS, one per account (config.md "Instances: several
/// accounts on one NAS"): `photolalad@NAME.service` reads `/etc/photolala/NAME.toml`, and
/// every default that names a place follows the instance, so two accounts never share a
/// database, a socket or a socket group unless their files say so.
package struct Instance: Sendable, Equatable, Hashable, CustomStringConvertible {
    package let name: String

    /// Where instances' config files are: `photolalad.toml` is the instance without a name.
    package static let configDirectory = "/etc/photolala"

    /// nil with the reason when `name` cannot name an instance. Lower-case letters, digits,
    /// `-` and `_`, starting with a letter or digit, at most 32: the name becomes a file, a
    /// socket, a directory and the group `photolala-NAME` (groupadd's rules), and
    /// `photolalad` is the instance without a name.
    package static func problem(_ name: String) -> String? {
        guard !name.isEmpty, name.utf8.count <= 32 else { return "1 to 32 characters" }
        let allowed = name.utf8.allSatisfy { c in
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
                || c == UInt8(ascii: "-") || c == UInt8(ascii: "_")
        }
        guard allowed else { return "only lower-case letters, digits, '-' and '_'" }
        guard let first = name.utf8.first, first != UInt8(ascii: "-"), first != UInt8(ascii: "_") else {
            return "a letter or a digit first"
        }
        if name == "photolalad" { return "not \"photolalad\": that is the instance without a name (photolalad.service)" }
        return nil
    }

    package init?(_ name: String) {
        guard Self.problem(name) == nil else { return nil }
        self.name = name
    }

    package var description: String { name }

    package var configPath: String { "\(Self.configDirectory)/\(name).toml" }
    package var stateDir: String { "/var/lib/photolala/\(name)" }
    package var socket: String { "/run/photolala/\(name).sock" }
    package var socketGroup: String { "photolala-\(name)" }

    /// The status page's default port: photolalad.service has 8770, each instance a port of
    /// 8771–8869 derived from its name (FNV-1a), so that two instances on one NAS serve
    /// their pages without a line in either file, and the same name always gets the same
    /// port whatever other instances exist. Two names can land on one port (about 6% for
    /// four instances): `--check-config` says so, and setting `[web] listen` in one file
    /// ends it.
    package var webPort: Int { Self.firstWebPort + Int(Self.fnv1a(name) % UInt32(Self.webPorts)) }
    package static let firstWebPort = 8771
    package static let webPorts = 99

    static func fnv1a(_ text: String) -> UInt32 {
        var hash: UInt32 = 2_166_136_261
        for byte in text.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 16_777_619
        }
        return hash
    }

    /// The instance a config file in `configDirectory` belongs to: nil for `photolalad.toml`
    /// (the instance without a name), `.failure` for a file whose name is not an instance's.
    package static func owning(fileName: String) -> Result<Instance?, NameProblem>? {
        guard fileName.hasSuffix(".toml") else { return nil }
        let stem = String(fileName.dropLast(".toml".count))
        if stem == "photolalad" { return .success(nil) }
        if let why = problem(stem) { return .failure(NameProblem(name: stem, why: why)) }
        return .success(Instance(stem))
    }

    package struct NameProblem: Error, Sendable, Equatable {
        package let name: String
        package let why: String
    }
}

extension Settings {
    /// Every default of config.md, with the places of `instance` (nil: the instance
    /// without a name, `photolalad.service`).
    package init(instance: Instance?) {
        self.init()
        self.instance = instance
        if let instance {
            daemon.stateDir = instance.stateDir
            daemon.socket = instance.socket
            daemon.socketGroup = instance.socketGroup
            web.listen = Settings.ListenAddress(host: Settings.Web.defaultListen.host, port: instance.webPort)
        }
    }
}

extension DaemonStatus {
    /// The command that reaches this daemon: `photolalactl`, or with `--instance NAME`.
    package var ctl: String { instance.map { "photolalactl --instance \($0)" } ?? "photolalactl" }

    /// An instance's daemon says the commands that reach it: its sentences are written for
    /// photolalad.service (`photolalactl login`, `systemctl restart photolalad`), and the
    /// same words read by the owner of another instance would act on the wrong account.
    package mutating func address(to instance: Instance) {
        self.instance = instance.name
        func addressed(_ text: String) -> String {
            var t = text.replacingOccurrences(of: "photolalactl ", with: "photolalactl --instance \(instance.name) ")
            for verb in ["start", "stop", "restart", "reload", "status"] {
                t = t.replacingOccurrences(of: "systemctl \(verb) photolalad", with: "systemctl \(verb) photolalad@\(instance.name)")
            }
            return t
        }
        problems = problems.map(addressed)
        attention = attention.map { item in
            var item = item
            item.message = addressed(item.message)
            item.action = item.action.map(addressed)
            item.run = item.run.map(addressed)
            return item
        }
    }
}
