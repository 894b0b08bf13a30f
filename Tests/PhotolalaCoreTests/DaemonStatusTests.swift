import Foundation
import Testing
import PhotolalaCore

@Suite struct DaemonStatusTests {
    @Test func encodesContractFieldsWithExplicitNulls() throws {
        var s = DaemonStatus(state: .needsLogin)
        s.queue.pending = 3
        let data = try JSONEncoder().encode(s)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["state"] as? String == "needsLogin")
        #expect(object["pauseReason"] is NSNull)
        let account = try #require(object["account"] as? [String: Any])
        #expect(account["userId"] is NSNull)
        #expect(account["signedIn"] as? Bool == false)
        let apple = try #require(object["appleCredential"] as? [String: Any])
        #expect(apple["checkedAt"] is NSNull && apple["nextCheckAt"] is NSNull)
        let credentials = try #require(object["credentials"] as? [String: Any])
        #expect(credentials["expiresAt"] is NSNull)
        let queue = try #require(object["queue"] as? [String: Any])
        for key in ["pending", "hashing", "uploading", "uploaded", "failed", "pendingBytes", "uploadedBytes"] {
            #expect(queue[key] != nil, "queue.\(key)")
        }
        let watch = try #require(object["watch"] as? [String: Any])
        for key in ["folders", "directories", "missingFolders"] { #expect(watch[key] != nil, "watch.\(key)") }
        let back = try JSONDecoder().decode(DaemonStatus.self, from: data)
        #expect(back == s)
    }

    @Test func summaryAnswersIsItBackedUp() {
        var s = DaemonStatus(state: .running)
        s.queue.uploaded = 10
        #expect(StatusSummary.oneLine(s) == "All 10 files backed up")
        s.queue.pending = 2
        s.queue.pendingBytes = 2_000_000
        #expect(StatusSummary.oneLine(s).hasPrefix("Backing up: 2 waiting (2.0 MB)"))
        s.queue.uploading = 1
        s.s3 = DaemonStatus.S3Health(state: .backoff, failures: 3)
        #expect(StatusSummary.oneLine(s).hasPrefix("Waiting for S3 (retrying after errors): 3 waiting"))
        s.s3 = DaemonStatus.S3Health(state: .ok)
        #expect(StatusSummary.oneLine(s).hasPrefix("Backing up: 1 uploading"))
        s.state = .paused
        s.pauseReason = .quotaExceeded
        #expect(StatusSummary.oneLine(s).hasPrefix("Paused (quotaExceeded)"))
        s.state = .needsLogin
        #expect(StatusSummary.oneLine(s).contains("photolalactl login"))
    }

    @Test func everyPauseReasonSaysWhatToDo() {
        for reason in DaemonStatus.PauseReason.allCases {
            #expect(reason.explanation.contains("photolalactl") || reason.explanation.contains("Photolala app"))
        }
        #expect(DaemonStatus.PauseReason.appleRevoked.explanation == "Your Apple ID no longer authorizes Photolala on this NAS. Run `photolalactl login`.")
    }
}
