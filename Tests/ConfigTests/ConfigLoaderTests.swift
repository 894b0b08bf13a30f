import Testing
import Config
import PhotolalaCore

@Suite struct ConfigLoaderTests {
    @Test func defaultsApplyToEveryKey() throws {
        let s = try ConfigLoader.parse("[watch]\nfolders = [\"/srv/photos/\"]\n")
        #expect(s.watch.folders == ["/srv/photos"])
        #expect(s.watch.settle == .seconds(5))
        #expect(s.watch.rescanInterval == .seconds(21600))
        #expect(s.watch.extensions.contains("heic"))
        #expect(s.upload.concurrency == 4)
        #expect(s.upload.multipartThreshold == 64 << 20)
        #expect(s.upload.partSize == 16 << 20)
        #expect(s.upload.bandwidthLimit == nil)
        #expect(s.upload.storageClass == "STANDARD")
        #expect(s.credentials.refreshBeforeExpiry == .seconds(300))
        #expect(s.credentials.appleCheckInterval == .seconds(21600))
        #expect(s.daemon.stateDir == "/var/lib/photolala")
        #expect(s.daemon.socket == "/run/photolala/photolalad.sock")
        #expect(s.daemon.socketGroup == "photolala")
        #expect(s.daemon.logLevel == .info)
        #expect(s.account.apiURL == "https://api.photolala.app")
    }

    @Test func everyProblemAtOnceEachNamingItsKey() {
        do {
            _ = try ConfigLoader.parse("[watch]\nfolders = [\"x\"]\nsettle = \"soon\"\n[upload]\nconcurrency = 0\n", path: "/etc/x.toml")
            Issue.record("expected an error")
        } catch {
            #expect(error.problems.map(\.key) == ["watch.folders", "watch.settle", "upload.concurrency"])
            #expect(error.description.contains("/etc/x.toml: upload.concurrency = 0: expected a whole number from 1 to 64"))
        }
    }

    @Test(arguments: [
        ("https://api.photolala.app", true), ("http://127.0.0.1:5000", true), ("http://127.9.9.9", true),
        ("http://localhost", true), ("http://[::1]:80", true), ("http://api.photolala.app", false),
        ("http://192.168.1.2", false), ("ftp://x", false), ("nonsense", false),
    ])
    func apiURLMustBeHTTPSUnlessLoopback(url: String, ok: Bool) {
        #expect((TableReader.urlProblem(url, example: "https://api.photolala.app") == nil) == ok)
    }

    @Test func effectiveSettingsRoundTrip() throws {
        let s = try ConfigLoader.parse("[watch]\nfolders = [\"/a\"]\nrescan_interval = \"off\"\n[upload]\nbandwidth_limit = \"10MiB/s\"\n[account]\ndevice_name = \"nas\"\n")
        let again = try ConfigLoader.parse(EffectiveSettings.toml(s))
        #expect(again == s)
    }
}
