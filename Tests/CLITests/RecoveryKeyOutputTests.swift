import Control
import Foundation
import PhotolalaCore
import Testing
import CLI

/// What people read about the recovery key: the status line, "Action needed", login's
/// hint, and `recovery-key`'s own output.
@Suite struct RecoveryKeyOutputTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func human(_ recovery: DaemonStatus.Recovery) -> [String] {
        var s = DaemonStatus(state: .running)
        s.account = .init(signedIn: true, userId: "550E8400-E29B-41D4-A716-446655440000")
        s.recovery = recovery
        s.attention = AttentionRules().items(for: s, facts: .init(), now: now)
        return StatusRenderer.human(s, color: false, now: now).split(separator: "\n").map(String.init)
    }

    @Test func neededIsAnActionNeededLineWithTheCommand() {
        let out = human(.init(state: .needed))
        #expect(out.contains { $0.hasPrefix("  Action needed:") && $0.hasSuffix("Enter this account's recovery key: sudo photolalactl recovery-key --enter") })
        #expect(out.contains("Keys       this account's recovery key is needed: sudo photolalactl recovery-key --enter"))
    }

    @Test func readyShowsTheFingerprintAndAnOutdatedCopySaysSo() {
        let fp = String(repeating: "ab", count: 16)
        let ready = human(.init(state: .ready, fingerprint: fp))
        #expect(ready.contains("Keys       account key \(fp); recovery key: photolalactl recovery-key"))
        #expect(!ready.contains { $0.contains("Action needed") })
        let outdated = human(.init(state: .ready, fingerprint: fp, outdated: true))
        #expect(outdated.contains { $0.hasPrefix("Keys       account key \(fp)") && $0.contains("outdated") })
        #expect(human(.init(state: .none)).allSatisfy { !$0.hasPrefix("Keys") })
    }

    @Test func loginSaysToKeepAKeyItMadeAndToEnterOneItDidNot() throws {
        var made = LoginProgress(state: .signedIn, userId: "u")
        made.accountKeyCreated = true
        made.recovery = .ready
        let keep = try #require(LoginCommand.keyHint(made))
        #expect(keep.contains("sudo photolalactl recovery-key") && keep.contains("somewhere other than this NAS"))
        var asked = LoginProgress(state: .signedIn, userId: "u")
        asked.accountKeyCreated = false
        asked.recovery = .needed
        let enter = try #require(LoginCommand.keyHint(asked))
        #expect(enter.contains("sudo photolalactl recovery-key --enter") && !enter.contains("somewhere other than this NAS"))
        // The same account signed in again on the NAS that holds the key: nothing to say.
        asked.recovery = .ready
        #expect(LoginCommand.keyHint(asked) == nil)
    }

    @Test func theShownKeyAndItsJSON() throws {
        let view = RecoveryKeyView(recoveryKey: "0123-4567-89AB-CDEF-GHJK-MNPQ-RSTV-WXYZ", fingerprint: "f", createdAt: "2026-11-26T10:00:00Z",
                                   outdated: false)
        let text = RecoveryKeyCommand.render(view, rotated: false, json: false)
        #expect(text.hasPrefix("Recovery key:  0123-4567-89AB-CDEF-GHJK-MNPQ-RSTV-WXYZ\n") && text.contains("somewhere other than this NAS"))
        #expect(RecoveryKeyCommand.render(view, rotated: true, json: false).contains("previous recovery key opens nothing"))
        let json = try JSONSerialization.jsonObject(with: Data(RecoveryKeyCommand.render(view, rotated: false, json: true).utf8)) as? [String: Any]
        #expect(json?["recoveryKey"] as? String == view.recoveryKey && json?["fingerprint"] as? String == "f"
                && json?["createdAt"] as? String == view.createdAt && json?["outdated"] as? Bool == false)
    }
}
