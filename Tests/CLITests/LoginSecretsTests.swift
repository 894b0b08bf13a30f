import Testing
@testable import CLI

/// `login --identity-token -` and `--authorization-code -` (cli.md): "-" reads the value
/// from standard input, one line each, the token's first; a value on the command line
/// still works but is named in a warning.
@Suite struct LoginSecretsTests {
    /// Standard input as lines; records what was asked for, in order.
    final class Input {
        var lines: [String]
        var asked: [String] = []
        init(_ lines: [String]) { self.lines = lines }
        func line(_ what: String) -> String? {
            asked.append(what)
            return lines.isEmpty ? nil : lines.removeFirst()
        }
    }

    @Test func bothFromStandardInputTheTokensLineFirst() throws {
        let input = Input(["eyJ.token.sig\r", "  ac_123  ", "unread"])
        let s = try LoginSecrets.resolve(identityToken: "-", authorizationCode: "-", line: input.line)
        #expect(s == LoginSecrets(identityToken: "eyJ.token.sig", authorizationCode: "ac_123"))
        #expect(input.asked == ["identity token", "authorization code"])
        #expect(s.warning == nil)
    }

    @Test func onlyTheTokenFromStandardInput() throws {
        let input = Input(["eyJ.token.sig"])
        let s = try LoginSecrets.resolve(identityToken: "-", authorizationCode: nil, line: input.line)
        #expect(s == LoginSecrets(identityToken: "eyJ.token.sig", authorizationCode: nil))
        #expect(s.warning == nil)
    }

    @Test func theOldFormWarnsAndNamesTheWayOut() throws {
        let input = Input([])
        let s = try LoginSecrets.resolve(identityToken: "eyJ.visible", authorizationCode: nil, line: input.line)
        #expect(s.identityToken == "eyJ.visible" && input.asked.isEmpty)
        let warning = try #require(s.warning)
        #expect(warning.hasPrefix("the identity token is visible to other users on the command line (ps, /proc)"))
        #expect(warning.contains("shell's history") && warning.hasSuffix("instead: --identity-token -"))
        #expect(!warning.contains("eyJ.visible"))
    }

    @Test func aCodeOnTheCommandLineIsNamedToo() throws {
        let input = Input(["eyJ.token.sig"])
        let mixed = try LoginSecrets.resolve(identityToken: "-", authorizationCode: "ac_visible", line: input.line)
        #expect(mixed.identityToken == "eyJ.token.sig" && mixed.authorizationCode == "ac_visible")
        #expect(mixed.warning?.hasPrefix("the authorization code is visible") == true)
        #expect(mixed.warning?.hasSuffix("instead: --authorization-code -") == true)
        let both = try LoginSecrets.resolve(identityToken: "eyJ", authorizationCode: "ac", line: Input([]).line)
        #expect(both.warning?.hasPrefix("the identity token and the authorization code are visible") == true)
        #expect(both.warning?.hasSuffix("instead: --identity-token - --authorization-code -") == true)
    }

    @Test func nothingOnStandardInputIsRefusedByName() {
        #expect(throws: LoginSecrets.Missing(what: "identity token", option: "--identity-token")) {
            try LoginSecrets.resolve(identityToken: "-", authorizationCode: "-", line: Input([]).line)
        }
        #expect(throws: LoginSecrets.Missing(what: "identity token", option: "--identity-token")) {
            try LoginSecrets.resolve(identityToken: "-", authorizationCode: nil, line: Input(["   "]).line)
        }
        #expect(throws: LoginSecrets.Missing(what: "authorization code", option: "--authorization-code")) {
            try LoginSecrets.resolve(identityToken: "-", authorizationCode: "-", line: Input(["eyJ.token.sig"]).line)
        }
        #expect("\(LoginSecrets.Missing(what: "identity token", option: "--identity-token"))"
            == "standard input held no identity token (--identity-token - reads it from there, one line)")
    }

    @Test func aDashParsesAsTheValue() throws {
        let command = try Ctl.parseAsRoot(["login", "--identity-token", "-", "--authorization-code", "-"])
        let login = try #require(command as? LoginCommand)
        #expect(login.identityToken == "-" && login.authorizationCode == "-")
    }
}
