import Foundation
import PhotolalaCore
import Testing
import CLI

/// The human `photolalactl status` in every state: the words a user relies on to know
/// whether their photos are backed up and what to do if not.
@Suite struct StatusRendererTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func render(_ s: DaemonStatus, color: Bool = false) -> String {
        StatusRenderer.human(s, color: color, now: now)
    }

    func lines(_ s: DaemonStatus) -> [String] {
        render(s).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// A signed-in daemon with two folders and 10 photos backed up.
    func running() -> DaemonStatus {
        var s = DaemonStatus(state: .running)
        s.account = .init(signedIn: true, userId: "550E8400-E29B-41D4-A716-446655440000")
        s.appleCredential = .init(state: .authorized, checkedAt: "2026-11-22T07:00:00Z", nextCheckAt: "2026-11-22T13:00:00Z")
        s.credentials = .init(state: .valid, expiresAt: "2026-11-22T08:00:00Z")
        s.queue.uploaded = 10
        s.queue.uploadedBytes = 25_000_000
        s.watch.folders = 2
        s.watch.directories = 40
        s.watch.paths = ["/srv/photos", "/srv/phone"]
        s.startedAt = "2026-11-22T06:00:00Z"
        return s
    }

    /// The status page's line (web.md): its address, or why it is not served.
    @Test func theStatusPageLine() {
        var s = running()
        s.web = .init(listen: "127.0.0.1:8770", url: "http://127.0.0.1:8770/", listenSet: true, sessions: 1)
        #expect(lines(s).contains("Web        http://127.0.0.1:8770/; 1 session open"))
        s.web = .init(listen: "0.0.0.0:8770", url: "http://192.168.1.20:8770/", plainHTTPBeyondLoopback: true)
        #expect(lines(s).contains("Web        http://192.168.1.20:8770/ (plain HTTP beyond loopback: allow_plain_http)"))
        s.web = .init(listen: "127.0.0.1:8770", lastError: "cannot listen on 127.0.0.1:8770: the port is in use")
        #expect(lines(s).contains("! Web      not served on 127.0.0.1:8770: cannot listen on 127.0.0.1:8770: the port is in use (tried again every minute)"))
        s.web = .init(listen: nil)
        #expect(!render(s).contains("Web "))
    }

    @Test func starting() {
        let out = lines(DaemonStatus(state: .starting))
        #expect(out[0] == "… Starting")
        #expect(out.last(where: { !$0.isEmpty }) == "photolalad 0.1.0, state starting")
    }

    @Test func runningAndIdleSaysEverythingIsBackedUp() {
        let out = render(running())
        #expect(out.hasPrefix("● All 10 files backed up\n"))
        #expect(out.contains("Files      10 backed up (25.0 MB), 0 waiting, 0 reading, 0 uploading, 0 failed"))
        #expect(!out.contains("Progress"), "no progress bar with nothing to send")
        #expect(out.contains("Account    signed in as 550E8400-E29B-41D4-A716-446655440000"))
        #expect(out.contains("Apple ID   authorized, checked 2026-11-22T07:00:00Z, next 2026-11-22T13:00:00Z"))
        #expect(out.contains("Storage    credentials valid, expire 2026-11-22T08:00:00Z"))
        #expect(out.contains("Watching   2 folders, 40 directories\n           /srv/photos\n           /srv/phone\n"))
        #expect(out.hasSuffix("photolalad 0.1.0, state running, up since 2026-11-22T06:00:00Z\n"))
    }

    @Test func runningWithNothingFoundYet() {
        var s = running()
        s.queue = .init()
        #expect(lines(s)[0] == "● Running: no photos found yet in the watched folders")
    }

    @Test func uploadingShowsProgressRateAndETA() {
        var s = running()
        s.queue.uploaded = 30
        s.queue.pending = 6
        s.queue.uploading = 4
        s.queue.pendingBytes = 120_000_000
        s.queue.uploadRate = 2_500_000
        s.queue.etaSeconds = 125
        let out = lines(s)
        #expect(out[0] == "● Backing up: 4 uploading, 10 waiting (120.0 MB), 30 backed up")
        // 30 of 40 files: three quarters of the bar.
        #expect(out.contains("Progress   [######################--------] 75%  2.5 MB/s  ETA 2m5s"))
        #expect(out.contains("To send    120.0 MB"))
    }

    @Test func readingNewPhotosShowsTheReadRate() {
        var s = running()
        s.queue.hashing = 2
        s.queue.pendingBytes = 8_000_000
        s.queue.hashRate = 150_000_000
        let out = render(s)
        #expect(out.hasPrefix("● Reading new photos: 2 waiting (8.0 MB), 10 backed up"))
        #expect(out.contains("To send    8.0 MB, reading at 150.0 MB/s"))
        #expect(!out.contains("ETA"), "no ETA without an estimate")
    }

    @Test(arguments: DaemonStatus.PauseReason.allCases)
    func pausedSaysWhyAndWhatToDo(reason: DaemonStatus.PauseReason) {
        var s = running()
        s.state = .paused
        s.pauseReason = reason
        s.queue.pending = 3
        let out = lines(s)
        #expect(out[0] == "‖ Paused (\(reason.rawValue)) — 3 waiting (0 B), 10 backed up")
        #expect(out.contains("  \(reason.explanation)"))
        #expect(out[1].contains("photolalactl") || out[1].contains("Photolala app"))
    }

    @Test func needsLoginSaysToLogIn() {
        var s = DaemonStatus(state: .needsLogin)
        s.queue.pending = 5
        let out = lines(s)
        #expect(out[0] == "‖ Not signed in: run photolalactl login — 5 waiting (0 B), 0 backed up")
        // A fresh install is not a problem: no "Action needed" (that list is the daemon's attention items).
        #expect(out[1] == "  Not signed in yet: run `photolalactl login` and confirm on your phone to start backing up.")
        #expect(out.contains("Account    not signed in"))
        #expect(out.contains("Storage    credentials none"))
    }

    @Test func aPairingUnderWayShowsTheCodeAndWhereToConfirmIt() {
        var s = DaemonStatus(state: .needsLogin)
        s.pairing = .init(userCode: "WDJB-MJHT", verificationUri: "https://photolala.app/pair",
                          verificationUriComplete: "https://photolala.app/pair?code=WDJB-MJHT", expiresAt: "2026-11-22T07:10:00Z")
        let out = lines(s)
        #expect(out[0].hasPrefix("‖ Pairing: confirm code WDJB-MJHT at https://photolala.app/pair"))
        #expect(out[1] == "  Pairing in progress: on your phone open https://photolala.app/pair?code=WDJB-MJHT and confirm the code WDJB-MJHT (expires 2026-11-22T07:10:00Z)")
        #expect(!render(s).contains("Not signed in yet"), "the pairing line replaces the login hint")
    }

    @Test func stopping() {
        var s = running()
        s.state = .stopping
        let out = lines(s)
        #expect(out[0] == "… Stopping")
        #expect(out.contains { $0.hasPrefix("photolalad 0.1.0, state stopping") })
    }

    @Test func missingFoldersAreNamed() {
        var s = running()
        s.watch.missingFolders = ["/srv/phone"]
        let out = lines(s)
        #expect(out.contains("           /srv/phone  — missing or unreadable (retrying)"))
        #expect(out.contains("           /srv/photos"), "a folder that is there is listed plainly")
    }

    @Test func problemsAreListedUnderTheHeadline() {
        var s = running()
        s.problems = ["the disk holding /var/lib/photolala is full", "the queue database cannot be written"]
        let out = lines(s)
        #expect(out[1] == "  Problem: the disk holding /var/lib/photolala is full")
        #expect(out[2] == "  Problem: the queue database cannot be written")
    }

    @Test func failedFilesSayHowToSeeAndRetryThem() {
        var s = running()
        s.queue.failed = 2
        let out = lines(s)
        #expect(out[0] == "! 10 files backed up, 2 failed (photolalactl queue --failed)")
        #expect(out.contains("           see `photolalactl queue --failed`; `photolalactl retry` tries them again"))
    }

    @Test func credentialsInBackoffShowTheLastError() {
        var s = running()
        s.credentials = .init(state: .backoff, lastError: "the backend could not be reached: timed out",
                              nextAttemptAt: "2026-11-22T07:01:00Z")
        #expect(lines(s).contains("Storage    credentials backoff (the backend could not be reached: timed out)"))
    }

    @Test func credentialsFailed() {
        var s = running()
        s.credentials = .init(state: .failed, lastError: "the backend refused: quota_exceeded")
        #expect(lines(s).contains("Storage    credentials failed (the backend refused: quota_exceeded)"))
    }

    @Test func aFailedAppleCheckIsShownNotTreatedAsRevocation() {
        var s = running()
        s.appleCredential.lastError = "HTTP 503"
        let out = render(s)
        #expect(out.contains("Apple ID   authorized, checked 2026-11-22T07:00:00Z, next 2026-11-22T13:00:00Z (last check failed: HTTP 503)"))
        #expect(out.hasPrefix("● "))
    }

    @Test func anS3OutageSaysEveryUploadWaitsAndWhenTheNextTryIs() {
        var s = running()
        s.queue.pending = 4
        s.s3 = .init(state: .backoff, failures: 3, since: "2026-11-22T06:50:00Z",
                     nextAttemptAt: Timestamp.string(now.addingTimeInterval(60)), lastError: "HTTP 503 SlowDown")
        let out = lines(s)
        #expect(out[0].hasPrefix("● Waiting for S3 (retrying after errors): 4 waiting"))
        #expect(out.contains("S3         retrying after 3 failed attempts since 2026-11-22T06:50:00Z; every upload waits, next try in 1m0s"))
        #expect(out.contains("           last error: HTTP 503 SlowDown"))
    }

    @Test func anS3RetryThatIsDueSaysSo() {
        var s = running()
        s.s3 = .init(state: .backoff, failures: 1, nextAttemptAt: Timestamp.string(now))
        #expect(lines(s).contains("S3         retrying after 1 failed attempt; trying again now"))
        s.s3 = .init(state: .ok)
        #expect(!render(s).contains("S3 "), "a healthy S3 is not mentioned")
    }

    @Test func theWatchLimitSaysWhichSettingToRaise() {
        var s = running()
        s.watch.watchLimitReached = true
        s.watch.maxUserWatches = 8192
        s.watch.unwatchedDirectories = 120
        s.watch.scanning = true
        let out = render(s)
        #expect(out.contains("Watching   2 folders, 40 directories (scanning)"))
        #expect(out.contains("inotify watch limit reached (fs.inotify.max_user_watches = 8192): 120 directories are rescanned periodically instead"))
    }

    @Test func colorOnlyOnATerminal() {
        var s = running()
        s.queue.failed = 1
        s.watch.missingFolders = ["/srv/phone"]
        #expect(!render(s).contains("\u{1B}["))
        let colored = render(s, color: true)
        #expect(colored.contains("\u{1B}[1m") && colored.contains("\u{1B}[33m!\u{1B}[0m") && colored.contains("\u{1B}[31m"))
    }

    @Test func durationsAndBars() {
        #expect(StatusRenderer.duration(59) == "59s")
        #expect(StatusRenderer.duration(125) == "2m5s")
        #expect(StatusRenderer.duration(3700) == "1h1m")
        #expect(StatusRenderer.bar(0.5, width: 10) == "[#####-----]")
        #expect(StatusRenderer.bar(0, width: 4) == "[----]")
        #expect(StatusRenderer.bar(1.7, width: 4) == "[####]")
    }
}
