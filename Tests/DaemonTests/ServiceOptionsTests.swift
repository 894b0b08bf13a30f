import Account
import Foundation
import Ingest
import Inventory
import PhotolalaCore
import Testing
import Upload
import Daemon

@Suite struct ServiceOptionsTests {
    func settings() -> Settings {
        var s = Settings()
        s.watch.folders = ["/srv/photos"]
        s.watch.settle = .seconds(9)
        s.watch.followSymlinks = true
        s.upload.concurrency = 2
        s.account.apiURL = "http://127.0.0.1:9"
        s.account.deviceName = "nas-attic"
        s.credentials.refreshBeforeExpiry = .seconds(120)
        s.credentials.appleCheckInterval = .seconds(3600)
        return s
    }

    @Test func theAccountTakesItsBackendNameAndTimings() {
        let o = AccountService.Options(settings())
        #expect(o.apiURL == "http://127.0.0.1:9")
        #expect(o.deviceName == "nas-attic")
        #expect(o.refreshBeforeExpiry == .seconds(120))
        #expect(o.appleCheckInterval == .seconds(3600))
    }

    @Test func theAccountTrustsTLSCAFileForTheBackend() {
        var s = settings()
        #expect(AccountService.Options(s).trust.caFile == nil)
        s.tls.caFile = "/etc/photolala/private-ca.pem"
        #expect(AccountService.Options(s).trust.caFile == "/etc/photolala/private-ca.pem")
    }

    @Test func noDeviceNameMeansTheHostName() {
        var s = settings()
        s.account.deviceName = nil
        #expect(AccountService.Options(s).deviceName == HostName.current())
    }

    @Test func everyStageMapsTheSameSettingsTheSameWayAtStartAndReload() {
        let s = settings()
        // The factories are the only mapping; equal settings give equal options.
        #expect(UploaderService.Options(s) == UploaderService.Options(s))
        #expect(IngestService.Options(s, hashWorkers: 2) == IngestService.Options(s, hashWorkers: 2))
        #expect(UploaderService.Options(s).followSymlinks == IngestService.Options(s).watcher.followSymlinks)
        var other = s
        other.upload.concurrency = 3
        #expect(UploaderService.Options(other) != UploaderService.Options(s))
        #expect(IngestService.Options(other, hashWorkers: 2) == IngestService.Options(s, hashWorkers: 2))
    }

    @Test func theInventoryListsAtTheConfiguredIntervalAndReadsBackAsManyAsUploadsRun() {
        var s = settings()
        s.upload.inventoryInterval = .seconds(6 * 3600)
        let o = InventoryService.Options(s)
        #expect(o.interval == .seconds(6 * 3600) && o.readBackConcurrency == 2)
        s.upload.concurrency = 64
        #expect(InventoryService.Options(s).readBackConcurrency == 8)
    }
}
