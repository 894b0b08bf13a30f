/// Inventory: what the bucket holds, from listing it (s3-layout.md, "Knowing what is already there"), and `verify`.
import AsyncHTTPClient
import Backend
import Bucket
import Credentials
import Foundation
import Logging
import PhotolalaCore
import Queue
import ServiceLifecycle

/// Lists `photos/{userId}/` and `thumbnails/{userId}/` (1,000 keys a page, one
/// transaction per page, nothing held beyond a page) after a sign-in, every
/// `upload.inventory_interval` and on `photolalactl verify`, into the queue's `inventory`
/// table. It never calls another stage: each page marks the objects waiting to be sent
/// that the bucket already holds (`uploaded` wakes the stages after the upload), the end
/// of a complete listing puts back in the queue what the bucket lost (`readyToUpload`),
/// and the listing's state in the queue is what the uploader reads to know whether it
/// may trust "not listed" (`inventoryChanged` wakes it).
///
/// By job: the passes (`+Listing`), `verify` (`+Verify`, `+ReadBack`), S3 requests with
/// fresh credentials (`+Requests`). The decisions are values: `InventorySchedule`,
/// `ObjectCheck`, `ListingReconciliation` (in the queue).
package actor InventoryService: Service {
    package struct Options: Sendable, Equatable {
        package var interval: Duration
        /// Objects `verify --deep` reads back at once.
        package var readBackConcurrency: Int
        /// The system's CAs plus `tls.ca_file`, as for the uploads.
        package var trust: TLSTrust

        /// The one mapping from settings, at start and on reload.
        package init(_ settings: Settings) {
            interval = settings.upload.inventoryInterval
            readBackConcurrency = max(1, min(8, settings.upload.concurrency))
            trust = TLSTrust(caFile: settings.tls.caFile)
        }
    }

    let database: QueueDatabase
    let account: AccountService
    let logger: Logger
    var options: Options
    let statusChanges: ChangeFeed
    let schedule: InventorySchedule
    let http: HTTPClient
    let wake = WakeSignal()
    var clockOffset: TimeInterval = 0
    /// A `verify` asked for and not begun yet: the share to read back (0: none).
    var verifyAsked: Double?
    /// The verify under way, or the last one (its result is also kept in the queue's
    /// `setting` table, so status shows it after a restart).
    var verify = VerifyProgress()
    var passRunning = false

    static let lastVerifyKey = "verify.last"

    package init(database: QueueDatabase, account: AccountService, options: Options, logger: Logger,
                statusChanges: ChangeFeed = ChangeFeed(), schedule: InventorySchedule = InventorySchedule()) {
        self.database = database
        self.account = account
        self.options = options
        self.logger = logger
        self.statusChanges = statusChanges
        self.schedule = schedule
        http = S3Client.makeHTTPClient(maximumConnectionsPerHost: 8)
        if let saved = try? database.setting(Self.lastVerifyKey),
           let result = try? JSONDecoder().decode(DaemonStatus.Verify.self, from: Data(saved.utf8)) {
            verify.result = result
        }
    }

    package func apply(_ new: Options) {
        guard new != options else { return }
        options = new
        Task { await wake.notify() }
    }

    static func photosPrefix(_ userId: String) -> String { "photos/\(userId)/" }
    static func thumbnailsPrefix(_ userId: String) -> String { "thumbnails/\(userId)/" }

    package func run() async throws {
        // A sign-in, a logout or a pause lifted shows as a change of the account's status.
        let accountChanges = account.statusChanges.changes()
        let relay = Task { [wake] in
            for await _ in accountChanges { await wake.notify() }
        }
        await withGracefulShutdownHandler {
            await loop()
        } onGracefulShutdown: { [wake] in
            Task { await wake.notify() }
        }
        relay.cancel()
        try? await http.shutdown()
    }

    private func loop() async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let since = await wake.current
            guard let userId = await account.userId, await account.uploadBlock == nil else {
                if verifyAsked != nil { finishVerify(failure: "photolalad is not signed in (or uploads are paused by the account): run `photolalactl status`") }
                await wake.wait(since: since, until: nil as Date?)
                continue
            }
            let photos = try? database.inventoryListing(prefix: Self.photosPrefix(userId))
            let due = verifyAsked != nil ? Date()
                : schedule.nextListing(photos: photos, interval: Units.seconds(options.interval), now: Date(), random: .random(in: 0..<1))
            guard due <= Date() else {
                await wake.wait(since: since, until: due)
                continue
            }
            if let deep = verifyAsked {
                verifyAsked = nil
                await runVerify(userId: userId, deepPercent: deep > 0 ? deep : nil)
            } else if case .complete = await listEverything(userId: userId, checkETags: false) {
                continue
            } else {
                // A pass that could not record its end (a full disk) would be due again at
                // once: never more often than this.
                let settle = await wake.current
                await wake.wait(since: settle, until: Date().addingTimeInterval(5))
            }
        }
    }

    /// `photolalactl verify [--deep P]`: begins one (or answers the one under way).
    package func requestVerify(deepPercent: Double?) -> VerifyProgress {
        if !verify.isFinished { return verify }
        verifyAsked = deepPercent ?? 0
        verify = VerifyProgress(phase: .queued, startedAt: Timestamp.string(Date()),
                                result: DaemonStatus.Verify(running: true, deepPercent: deepPercent))
        Task { await wake.notify() }
        statusChanges.changed()
        return verify
    }

    package func verifyProgress() -> VerifyProgress { verify }

    // MARK: status

    /// The inventory's part of the status: what the last listing found, the one under way,
    /// and the last verify.
    package func contribute(to s: inout DaemonStatus) async {
        s.verify = verify.result
        guard let userId = await account.userId else { return }
        let photos = try? database.inventoryListing(prefix: Self.photosPrefix(userId))
        let thumbnails = try? database.inventoryListing(prefix: Self.thumbnailsPrefix(userId))
        s.inventory.objects = (photos?.objects ?? 0) + (thumbnails?.objects ?? 0)
        s.inventory.listedAt = photos?.listedAt.map(Timestamp.string)
        s.inventory.lastError = photos?.lastError
        switch photos?.state {
        case nil: s.inventory.state = .notListed
        case .listing?: s.inventory.state = .listing
        case .complete?: s.inventory.state = .ok
        case .refused?: s.inventory.state = .refused
        case .failed?: s.inventory.state = .failed
        }
        if photos?.state == .listing || passRunning { s.inventory.seen = (photos?.seen ?? 0) + (thumbnails?.state == .listing ? thumbnails?.seen ?? 0 : 0) }
        if !passRunning, photos?.state != .listing {
            let next = schedule.nextListing(photos: photos, interval: Units.seconds(options.interval), now: Date(), random: 0.5)
            s.inventory.nextListingAt = Timestamp.string(next)
        }
    }
}
