import PhotolalaCore
import Testing
import Catalog

/// The catalog stage's one mapping from the settings, at start and on reload.
@Suite struct CatalogServiceOptionsTests {
    @Test func takesTheCatalogSectionAndTheUploadSizes() {
        var s = Settings()
        s.catalog.enabled = false
        s.catalog.publishInterval = .seconds(90)
        s.catalog.checkInterval = .seconds(7200)
        s.upload.multipartThreshold = 8 << 20
        s.upload.partSize = 6 << 20
        s.daemon.stateDir = "/var/lib/photolala"
        let o = CatalogService.Options(s)
        #expect(!o.enabled && o.publishInterval == .seconds(90) && o.checkInterval == .seconds(7200))
        #expect(o.multipartThreshold == 8 << 20 && o.partSize == 6 << 20 && o.stateDir == "/var/lib/photolala")
        #expect(CatalogService.Options(s) == o)
        #expect(CatalogService.Options(Settings()).enabled, "on by default: the apps show the NAS's photos")
    }

    @Test func theWorkspaceLivesInTheStateDirectory() {
        let w = CatalogWorkspace(stateDir: "/var/lib/photolala")
        #expect(w.currentPath == "/var/lib/photolala/catalog/current.csv")
        #expect(w.nextPath == "/var/lib/photolala/catalog/next.csv")
        #expect(w.scratchPath == "/var/lib/photolala/catalog/scratch.db")
    }
}
