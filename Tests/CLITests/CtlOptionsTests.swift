import Foundation
import Testing
import CLI

/// Where the CLI finds the daemon (config.md): --socket, $PHOTOLALA_SOCKET, the config's
/// daemon.socket, the default.
@Suite struct CtlOptionsTests {
    func options(_ args: [String]) throws -> CtlOptions {
        try CtlOptions.parse(args)
    }

    func config(socket: String, group: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-\(UUID().uuidString).toml").path
        try "[daemon]\nsocket = \"\(socket)\"\nsocket_group = \"\(group)\"\n".write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func socketBeatsEnvironmentBeatsConfigBeatsDefault() throws {
        let file = try config(socket: "/from/config.sock", group: "photos")
        defer { try? FileManager.default.removeItem(atPath: file) }
        let env = ["PHOTOLALA_SOCKET": "/from/env.sock", "PHOTOLALA_CONFIG": file]
        #expect(try options(["--socket", "/from/flag.sock"]).client(environment: env).socketPath == "/from/flag.sock")
        #expect(try options([]).client(environment: env).socketPath == "/from/env.sock")
        #expect(try options([]).client(environment: ["PHOTOLALA_CONFIG": file]).socketPath == "/from/config.sock")
        #expect(try options(["--config", file]).client(environment: [:]).socketPath == "/from/config.sock")
        #expect(try options(["--config", "/nonexistent.toml"]).client(environment: [:]).socketPath == "/run/photolala/photolalad.sock")
    }

    @Test func theGroupToJoinComesFromTheConfig() throws {
        let file = try config(socket: "/s", group: "photos")
        defer { try? FileManager.default.removeItem(atPath: file) }
        #expect(try options(["--config", file, "--socket", "/x"]).client(environment: [:]).groupHint == "photos")
        #expect(try options(["--config", "/nonexistent.toml"]).client(environment: [:]).groupHint == "photolala")
    }

    @Test func exitCodesOfCliMd() {
        #expect(CtlFailure.code(.notRunning(path: "/s")) == 3)
        #expect(CtlFailure.code(.permissionDenied(hint: "join the group 'photolala'")) == 4)
        #expect(CtlFailure.code(.protocolError("HTTP 500")) == 1)
        #expect(CtlFailure.code(.timedOut(path: "/s")) == 1)
    }
}
