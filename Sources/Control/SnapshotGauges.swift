import Foundation
import PhotolalaCore
import Prometheus

/// The gauges: every one is read from the `DaemonStatus` snapshot that `photolalactl
/// status --json` prints, so a dashboard and the CLI can never disagree. A state is one
/// series per value, 1 for the current one and 0 for the others, so an alert can say
/// `photolala_paused{reason="quotaExceeded"} == 1`. Times are Unix seconds, 0 before the
/// first; the credentials' time left is left out while there are none.
package enum SnapshotGauges {
    package struct Family: Sendable, Hashable {
        package var name: String
        package var help: String
    }

    package struct Sample: Sendable {
        package var family: Family
        package var labels: [(String, String)]
        package var value: Double
    }

    static let buildInfo = Family(name: "photolala_build_info", help: "1, labelled with the daemon's version.")
    static let startTime = Family(name: "photolala_start_time_seconds", help: "When the daemon started, in Unix seconds.")
    static let state = Family(name: "photolala_state", help: "The daemon's state: 1 for the current one (starting, running, paused, needsLogin, stopping).")
    static let paused = Family(name: "photolala_paused", help: "1 for the reason uploads are paused (user, appleRevoked, appleNotFound, appleTransferred, subscriptionRequired, quotaExceeded, accountRevoked, schedule), all 0 when not paused.")
    static let signedIn = Family(name: "photolala_signed_in", help: "1 when this NAS is signed in to Photolala.")
    static let appleState = Family(name: "photolala_apple_credential_state", help: "The Apple credential state the last check found: 1 for the current one.")
    static let appleChecked = Family(name: "photolala_apple_credential_checked_timestamp_seconds", help: "When the Apple credential state was last checked, in Unix seconds (0: never).")
    static let stsState = Family(name: "photolala_sts_credentials_state", help: "The STS credentials' state: 1 for the current one (none, fetching, valid, refreshing, backoff, failed).")
    static let stsExpiresIn = Family(name: "photolala_sts_credentials_expires_in_seconds", help: "Seconds until the STS credentials expire (negative once expired); absent while there are none.")
    static let s3Outage = Family(name: "photolala_s3_outage", help: "1 while S3 as a whole fails and every upload waits.")
    static let s3Failures = Family(name: "photolala_s3_consecutive_failures", help: "Failed attempts in a row while S3 fails as a whole (0 when it answers).")
    static let files = Family(name: "photolala_files", help: "Files (paths) by state: pending (settling, waiting for a hash or an upload), hashing, uploading, uploaded, failed.")
    static let filesBytes = Family(name: "photolala_files_bytes", help: "Bytes of the files waiting (pending, with those being uploaded) and of those uploaded.")
    static let oldestPending = Family(name: "photolala_oldest_pending_file_age_seconds", help: "Seconds since the file waiting longest last changed state (was found, hashed or last tried); 0 when none waits.")
    static let lastUpload = Family(name: "photolala_last_upload_timestamp_seconds", help: "When an object last reached S3 (sent, or found already there), in Unix seconds (0: never).")
    static let watchedFolders = Family(name: "photolala_watched_folders", help: "Folders configured in watch.folders.")
    static let watchedDirectories = Family(name: "photolala_watched_directories", help: "Directories watched with inotify.")
    static let missingFolders = Family(name: "photolala_missing_folders", help: "Watched folders that are missing or unreadable.")
    static let unwatched = Family(name: "photolala_unwatched_directories", help: "Directories scanned periodically instead of watched, because the inotify watch limit was reached.")
    static let watchLimit = Family(name: "photolala_watch_limit_reached", help: "1 when inotify ran out of watches (raise fs.inotify.max_user_watches).")
    static let scanning = Family(name: "photolala_scanning", help: "1 while a scan of the watched folders runs.")
    static let lastScan = Family(name: "photolala_last_scan_timestamp_seconds", help: "When the last scan of the watched folders finished, in Unix seconds (0: never).")
    static let problems = Family(name: "photolala_problems", help: "Problems status shows that need the user and are not a pause (a full disk, a damaged database, a folder or port that cannot be used).")
    static let catalogState = Family(name: "photolala_catalog_state", help: "The apps' catalog publishing state: 1 for the current one (off, idle, pending, publishing, published, blocked).")
    static let catalogRows = Family(name: "photolala_catalog_rows", help: "This NAS's rows in the apps' catalog as last published or checked.")
    static let catalogPublished = Family(name: "photolala_catalog_published_timestamp_seconds", help: "When the catalog was last published, in Unix seconds (0: never).")
    static let thumbnails = Family(name: "photolala_thumbnails", help: "Photos by thumbnail state: done, pending, failed (could not be decoded).")
    static let inventoryObjects = Family(name: "photolala_inventory_objects", help: "Objects the last bucket listing found under this account's prefixes.")
    static let inventoryListed = Family(name: "photolala_inventory_listed_timestamp_seconds", help: "When the bucket was last listed, in Unix seconds (0: never).")
    static let verifyObjects = Family(name: "photolala_verify_objects", help: "The last verify: objects checked, missing, and mismatched (wrong size or bytes).")
    static let attention = Family(name: "photolala_attention", help: "Things that need the user now, by reason (the \"Action needed\" lines of status and what notifications tell): notSignedIn, appleRevoked, quotaExceeded, folderMissing, stateDirectoryFull, s3Failing, certificateRefused, ...")
    static let notifyFailing = Family(name: "photolala_notify_channel_failing", help: "1 while a notification channel's last attempt failed (its events are retried for a day), by channel.")
    static let notifyPending = Family(name: "photolala_notify_pending", help: "Notifications waiting to be sent again, by channel.")
    static let bandwidthLimit = Family(name: "photolala_upload_bandwidth_limit_bytes", help: "Bytes per second uploads may use now (upload.bandwidth_limit, or its timetable's slot); 0 while the timetable pauses; absent without a limit.")
    static let mirrorObjects = Family(name: "photolala_mirror_objects", help: "The mirror's objects (mirror.md) by state: present (copied or adopted), pending, archived, onlyHere, removedHere, refused, trashed; all 0 while the mirror is off.")
    static let mirrorState = Family(name: "photolala_mirror_state", help: "The mirror's state: 1 for the current one (off, idle, pulling, paused).")
    static let mirrorPaused = Family(name: "photolala_mirror_paused", help: "1 for the reason the mirror waits (account, user, schedule, folder, diskFull), all 0 when it does not.")
    static let verifyChecked = Family(name: "photolala_verify_checked_timestamp_seconds", help: "When the last verify ran, in Unix seconds (0: never).")

    /// Every family, for the documentation's list and the tests.
    package static let families: [Family] = [
        buildInfo, startTime, state, paused, signedIn, appleState, appleChecked, stsState, stsExpiresIn, s3Outage, s3Failures,
        files, filesBytes, oldestPending, lastUpload, watchedFolders, watchedDirectories, missingFolders, unwatched, watchLimit,
        scanning, lastScan, problems, catalogState, catalogRows, catalogPublished, thumbnails, inventoryObjects, inventoryListed,
        verifyObjects, verifyChecked, attention, notifyFailing, notifyPending, bandwidthLimit, mirrorObjects, mirrorState, mirrorPaused,
    ]

    static let states: [DaemonStatus.State] = [.starting, .running, .paused, .needsLogin, .stopping]
    static let appleStates: [DaemonStatus.AppleCredential.State] = [.unknown, .authorized, .revoked, .notFound, .transferred]
    static let stsStates: [DaemonStatus.Credentials.State] = [.none, .fetching, .valid, .refreshing, .backoff, .failed]
    static let catalogStates: [DaemonStatus.Catalog.State] = [.off, .idle, .pending, .publishing, .published, .blocked]
    static let mirrorStates: [DaemonStatus.Mirror.State] = [.off, .idle, .pulling, .paused]

    /// The snapshot as samples; `now` turns its times into ages.
    package static func samples(from s: DaemonStatus, now: Date) -> [Sample] {
        var out: [Sample] = []
        func add(_ family: Family, _ value: Double, _ labels: [(String, String)] = []) {
            out.append(Sample(family: family, labels: labels, value: value))
        }
        func add(_ family: Family, _ value: Int, _ labels: [(String, String)] = []) { add(family, Double(value), labels) }
        func flag(_ on: Bool) -> Double { on ? 1 : 0 }
        func seconds(_ text: String?) -> Double? { text.flatMap(Timestamp.parse)?.timeIntervalSince1970 }
        func oneOf<V: RawRepresentable<String> & Equatable>(_ family: Family, _ label: String, _ all: [V], _ current: V?) {
            for v in all { add(family, flag(v == current), [(label, v.rawValue)]) }
        }

        add(buildInfo, 1.0, [("version", s.version)])
        if let started = seconds(s.startedAt) { add(startTime, started) }
        oneOf(state, "state", states, s.state)
        oneOf(paused, "reason", DaemonStatus.PauseReason.allCases, s.pauseReason)
        add(signedIn, flag(s.account.signedIn))
        oneOf(appleState, "state", appleStates, s.appleCredential.state)
        add(appleChecked, seconds(s.appleCredential.checkedAt) ?? 0)
        oneOf(stsState, "state", stsStates, s.credentials.state)
        if let expires = seconds(s.credentials.expiresAt) { add(stsExpiresIn, expires - now.timeIntervalSince1970) }
        add(s3Outage, flag(s.s3?.state == .backoff))
        add(s3Failures, s.s3?.failures ?? 0)

        let q = s.queue
        for (name, n) in [("pending", q.pending), ("hashing", q.hashing), ("uploading", q.uploading), ("uploaded", q.uploaded), ("failed", q.failed)] {
            add(files, n, [("state", name)])
        }
        add(filesBytes, Double(q.pendingBytes), [("state", "pending")])
        add(filesBytes, Double(q.uploadedBytes), [("state", "uploaded")])
        add(oldestPending, seconds(q.oldestPendingAt).map { max(0, now.timeIntervalSince1970 - $0) } ?? 0)
        add(lastUpload, seconds(q.lastUploadAt) ?? 0)

        let w = s.watch
        add(watchedFolders, w.folders)
        add(watchedDirectories, w.directories)
        add(missingFolders, w.missingFolders.count)
        add(unwatched, w.unwatchedDirectories)
        add(watchLimit, flag(w.watchLimitReached))
        add(scanning, flag(w.scanning))
        add(lastScan, seconds(w.lastScanAt) ?? 0)
        add(problems, s.problems.count)

        oneOf(catalogState, "state", catalogStates, s.catalog.state)
        add(catalogRows, s.catalog.rows)
        add(catalogPublished, seconds(s.catalog.publishedAt) ?? 0)
        for (name, n) in [("done", s.thumbnails.done), ("pending", s.thumbnails.pending), ("failed", s.thumbnails.failed)] {
            add(thumbnails, n, [("state", name)])
        }
        add(inventoryObjects, s.inventory.objects)
        add(inventoryListed, seconds(s.inventory.listedAt) ?? 0)
        for (name, n) in [("checked", s.verify.checked), ("missing", s.verify.missing), ("mismatched", s.verify.mismatched)] {
            add(verifyObjects, n, [("result", name)])
        }
        add(verifyChecked, seconds(s.verify.checkedAt) ?? 0)

        for reason in AttentionItem.Reason.allCases {
            add(attention, s.attention.filter { $0.reason == reason }.count, [("reason", reason.rawValue)])
        }
        // Every channel kind, configured or not (0), so an alert's series exist from the start.
        for kind in ["webhook", "command", "healthcheck"] {
            let channel = s.notify.perChannel.first { $0.channel == kind }
            add(notifyFailing, flag(channel?.lastError != nil), [("channel", kind)])
            add(notifyPending, channel?.pending ?? 0, [("channel", kind)])
        }
        if let limit = s.bandwidth.limit { add(bandwidthLimit, Double(limit)) }

        let m = s.mirror
        for (name, n) in [("present", m.present), ("pending", m.pending), ("archived", m.archived), ("onlyHere", m.onlyHere),
                          ("removedHere", m.removedHere), ("refused", m.refused), ("trashed", m.trashed)] {
            add(mirrorObjects, n, [("state", name)])
        }
        oneOf(mirrorState, "state", mirrorStates, m.state)
        oneOf(mirrorPaused, "reason", DaemonStatus.Mirror.PauseReason.allCases, m.pauseReason)
        return out
    }

    /// Writes the samples as gauges into `registry` (a fresh one per scrape: nothing stale survives).
    static func fill(_ registry: PrometheusCollectorRegistry, from s: DaemonStatus, now: Date) {
        for sample in samples(from: s, now: now) {
            let descriptor = MetricNameDescriptor(metricName: sample.family.name, unitName: "", helpText: sample.family.help)
            let gauge = sample.labels.isEmpty ? registry.makeGauge(descriptor: descriptor)
                : registry.makeGauge(descriptor: descriptor, labels: sample.labels)
            gauge.set(sample.value)
        }
    }
}
