import Foundation
import Testing
import Config
import PhotolalaCore

/// Several accounts on one NAS (config.md "Instances"): names, each instance's defaults,
/// where its file is looked for, and what `--check-config` warns about beside the others.
@Suite struct InstanceTests {
    @Test(arguments: ["alice", "bob-2", "kids_ipad", "a", "0day", String(repeating: "x", count: 32)])
    func namesThatCanBeInstances(name: String) {
        #expect(Instance.problem(name) == nil)
        #expect(Instance(name)?.name == name)
    }

    @Test(arguments: ["", "Alice", "-x", "_x", "a.b", "a/b", "a b", "photolalad", "ä", String(repeating: "x", count: 33)])
    func namesThatCannot(name: String) {
        #expect(Instance.problem(name) != nil)
        #expect(Instance(name) == nil)
    }

    @Test func defaultsFollowTheInstance() throws {
        let alice = try #require(Instance("alice"))
        let s = try ConfigLoader.parse("[watch]\nfolders = [\"/srv/alice\"]\n", instance: alice)
        #expect(s.instance == alice)
        #expect(s.daemon.stateDir == "/var/lib/photolala/alice")
        #expect(s.daemon.socket == "/run/photolala/alice.sock")
        #expect(s.daemon.socketGroup == "photolala-alice")
        // Its page on a port of its own, the same whatever other instances exist.
        #expect(s.web.listen == Settings.ListenAddress(host: "127.0.0.1", port: 8830) && !s.web.listenSet)
        #expect(alice.configPath == "/etc/photolala/alice.toml")
        // What the file says still wins.
        let own = try ConfigLoader.parse("[watch]\nfolders = [\"/a\"]\n[daemon]\nstate_dir = \"/srv/state\"\nsocket_group = \"family\"\n",
                                         instance: alice)
        #expect(own.daemon.stateDir == "/srv/state" && own.daemon.socketGroup == "family" && own.daemon.socket == "/run/photolala/alice.sock")
        // No instance: photolalad.service, as before.
        let plain = try ConfigLoader.parse("[watch]\nfolders = [\"/a\"]\n")
        #expect(plain.instance == nil && plain.daemon.stateDir == "/var/lib/photolala" && plain.daemon.socketGroup == "photolala")
        #expect(plain.web.listen == Settings.Web.defaultListen)
        let off = try ConfigLoader.parse("[watch]\nfolders = [\"/a\"]\n[web]\nlisten = \"off\"\n", instance: alice)
        #expect(off.web.listen == nil)
    }

    @Test func eachInstancesPageHasAPortOfItsOwnRange() throws {
        let names = ["a", "b", "c", "alice", "bob", "carol", "mum", "dad", "kids", String(repeating: "z", count: 32)]
        let ports = try names.map { try #require(Instance($0)).webPort }
        #expect(ports.allSatisfy { (8771...8869).contains($0) }, "\(ports)")
        // A function of the name alone: these are what the README and a user's firewall see.
        #expect(ports.prefix(6) == [8778, 8847, 8857, 8830, 8857, 8782])
        #expect(Set(ports).count > 6, "the names spread over the range: \(ports)")
    }

    @Test func whatIsTypedBeatsTheEnvironment() throws {
        let env = ["PHOTOLALA_CONFIG": "/env/c.toml", "PHOTOLALA_INSTANCE": "bob"]
        let flag = try ConfigLoader.resolveInstance(flag: "alice", environment: env)
        #expect(flag.instance?.name == "alice" && flag.fromFlag)
        #expect(ConfigLoader.resolvePath(explicit: nil, instance: flag.instance, instanceFromFlag: true, environment: env)
                == "/etc/photolala/alice.toml")
        #expect(ConfigLoader.resolvePath(explicit: "/x.toml", instance: flag.instance, instanceFromFlag: true, environment: env) == "/x.toml")
        let fromEnv = try ConfigLoader.resolveInstance(flag: nil, environment: env)
        #expect(fromEnv.instance?.name == "bob" && !fromEnv.fromFlag)
        // $PHOTOLALA_CONFIG names a file, $PHOTOLALA_INSTANCE only a default: the file wins.
        #expect(ConfigLoader.resolvePath(explicit: nil, instance: fromEnv.instance, instanceFromFlag: false, environment: env)
                == "/env/c.toml")
        #expect(ConfigLoader.resolvePath(explicit: nil, instance: fromEnv.instance, instanceFromFlag: false,
                                         environment: ["PHOTOLALA_INSTANCE": "bob"]) == "/etc/photolala/bob.toml")
        let none = try ConfigLoader.resolveInstance(flag: nil, environment: [:])
        #expect(none.instance == nil)
        #expect(ConfigLoader.resolvePath(explicit: nil, instance: nil, environment: [:]) == "/etc/photolala/photolalad.toml")
    }

    @Test func aBadNameSaysWhatANameMayBe() {
        #expect(throws: ConfigError.self) { try ConfigLoader.resolveInstance(flag: "Alice", environment: [:]) }
        do {
            _ = try ConfigLoader.resolveInstance(flag: nil, environment: ["PHOTOLALA_INSTANCE": "../etc"])
            Issue.record("expected an error")
        } catch {
            #expect(error.description == "the environment: PHOTOLALA_INSTANCE = \"../etc\": expected an instance name: only lower-case letters, digits, '-' and '_'")
        }
    }

    @Test func configFilesNameTheirInstance() {
        #expect(Instance.owning(fileName: "photolalad.toml") == .success(nil))
        #expect(Instance.owning(fileName: "alice.toml") == .success(Instance("alice")))
        #expect(Instance.owning(fileName: "my-ca.pem") == nil)
        guard case .failure(let problem) = Instance.owning(fileName: "Alice.toml") else {
            Issue.record("Alice.toml is not an instance's file")
            return
        }
        #expect(problem.name == "Alice")
    }

    // MARK: --check-config beside the other instances

    func peer(_ name: String?, folders: [String], metrics: String? = nil, extra: String = "") throws -> InstanceChecks.Peer {
        let instance = name.flatMap(Instance.init)
        var text = "[watch]\nfolders = [" + folders.map { "\"\($0)\"" }.joined(separator: ", ") + "]\n" + extra
        if let metrics { text += "[metrics]\nlisten = \"\(metrics)\"\n" }
        let path = "/etc/photolala/\(name ?? "photolalad").toml"
        return .init(instance: instance, path: path, settings: try ConfigLoader.parse(text, path: path, instance: instance))
    }

    @Test func twoInstancesWatchingOneFolderAreWarnedAbout() throws {
        let alice = try peer("alice", folders: ["/srv/photos/alice", "/srv/shared"])
        let bob = try peer("bob", folders: ["/srv/photos/bob", "/srv/shared"])
        let warnings = InstanceChecks.warnings(alice, others: [bob])
        #expect(warnings == ["instance bob (/etc/photolala/bob.toml) also watches /srv/shared: its photos would be backed up to both accounts (watch only one account's folders in each instance)"])
    }

    @Test func aFolderInsideAnothersIsTheSamePhotos() throws {
        let main = try peer(nil, folders: ["/srv/photos"])
        let kid = try peer("kid", folders: ["/srv/photos/kid"])
        #expect(InstanceChecks.warnings(main, others: [kid]).first?.hasPrefix(
            "instance kid (/etc/photolala/kid.toml) watches /srv/photos/kid, inside /srv/photos: its photos would be backed up to both") == true)
        #expect(InstanceChecks.warnings(kid, others: [main]).first?.hasPrefix(
            "photolalad.service (/etc/photolala/photolalad.toml) watches /srv/photos, which holds /srv/photos/kid:") == true)
        // Neighbours whose names start alike are not one inside the other.
        let kids = try peer("kids", folders: ["/srv/photos-kids"])
        #expect(InstanceChecks.warnings(main, others: [kids]).isEmpty)
        #expect(InstanceChecks.warnings(try peer(nil, folders: ["/"]), others: [kids]).count == 1)
    }

    @Test func sharedStateSocketAndPortsAreWarnedAbout() throws {
        let a = try peer("a", folders: ["/a"], metrics: "127.0.0.1:9469", extra: "[daemon]\nstate_dir = \"/var/lib/x\"\n")
        let b = try peer("b", folders: ["/b"], metrics: "0.0.0.0:9469", extra: "[daemon]\nstate_dir = \"/var/lib/x\"\nsocket = \"/run/photolala/a.sock\"\n")
        let w = InstanceChecks.warnings(a, others: [b])
        #expect(w.count == 3, "\(w)")
        #expect(w.contains { $0.contains("keeps its state in /var/lib/x too") })
        #expect(w.contains { $0.contains("listens on /run/photolala/a.sock too") })
        #expect(w.contains { $0.contains("serves metrics on 0.0.0.0:9469 too") })
        // Instances left to their defaults share nothing.
        #expect(InstanceChecks.warnings(try peer("a", folders: ["/a"]), others: [try peer("b", folders: ["/b"]), try peer(nil, folders: ["/c"])]).isEmpty)
        let c = try peer("c", folders: ["/c"], metrics: "127.0.0.1:9470")
        #expect(InstanceChecks.warnings(a, others: [c]).isEmpty)
    }

    @Test func twoPagesOnOnePortAreWarnedAboutWithAFreeOne() throws {
        // bob's default port is c's: two names on one port of the range.
        let bob = try peer("bob", folders: ["/b"])
        let c = try peer("c", folders: ["/c"])
        #expect(bob.settings.web.listen == c.settings.web.listen)
        let w = InstanceChecks.warnings(bob, others: [c])
        #expect(w == ["instance c (/etc/photolala/c.toml) serves its status page on 127.0.0.1:8857 too: only one of them can "
                      + "(set web.listen apart, e.g. \"127.0.0.1:8771\", or \"off\")"], "\(w)")
        // An explicit address on every interface clashes with the loopback one on its port.
        let main = try peer(nil, folders: ["/m"], extra: "[web]\nlisten = \"0.0.0.0:8830\"\nallow_plain_http = true\n")
        let alice = try peer("alice", folders: ["/a"])
        #expect(InstanceChecks.warnings(alice, others: [main]).count == 1)
        #expect(InstanceChecks.warnings(alice, others: [try peer(nil, folders: ["/m"], extra: "[web]\nlisten = \"off\"\n")]).isEmpty)
    }

    @Test func peersAreReadFromTheDirectoryLeniently() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("instances-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "[watch]\nfolders = [\"/srv/a\"]\n".write(toFile: dir + "/photolalad.toml", atomically: true, encoding: .utf8)
        try "[watch]\nfolders = [\"/srv/b\"]\n".write(toFile: dir + "/bob.toml", atomically: true, encoding: .utf8)
        try "[watch]\nfolders = 1\n".write(toFile: dir + "/broken.toml", atomically: true, encoding: .utf8)
        // Not set up (as shipped): nothing to compare, nothing to say.
        try "[watch]\nfolders = []\n".write(toFile: dir + "/carol.toml", atomically: true, encoding: .utf8)
        try "x".write(toFile: dir + "/Not An Instance.toml", atomically: true, encoding: .utf8)
        try "x".write(toFile: dir + "/ca.pem", atomically: true, encoding: .utf8)
        let (peers, unreadable) = InstanceChecks.peers(in: dir, excluding: dir + "/photolalad.toml")
        #expect(peers.map(\.label) == ["instance bob (\(dir)/bob.toml)"])
        #expect(peers.first?.settings.daemon.stateDir == "/var/lib/photolala/bob")
        #expect(unreadable.count == 1 && unreadable[0].hasPrefix("\(dir)/broken.toml could not be compared"))
    }
}
