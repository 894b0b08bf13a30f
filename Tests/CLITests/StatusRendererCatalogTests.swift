import Foundation
import PhotolalaCore
import Testing
import CLI

/// The `Apps` line of `photolalactl status`: how many photos of this NAS the Photolala
/// apps show, and why not more.
@Suite struct StatusRendererCatalogTests {
    func out(_ c: DaemonStatus.Catalog, color: Bool = false) -> String {
        var s = DaemonStatus(state: .running)
        s.queue.uploaded = 12
        s.catalog = c
        return StatusRenderer.human(s, color: color, now: Date(timeIntervalSince1970: 1_800_000_000))
    }

    @Test func publishedSaysHowManyPhotosTheAppsShowAndHowManyTheCatalogHolds() {
        let text = out(.init(state: .published, rows: 58113, publishedAt: "2026-11-22T07:10:00Z", total: 61000))
        #expect(text.contains("Apps       58113 photos from this NAS in the Photolala apps (61000 in your catalog from all your devices), published 2026-11-22T07:10:00Z\n"))
        #expect(out(.init(state: .published, rows: 1, total: 1)).contains("Apps       1 photo from this NAS in the Photolala apps\n"))
    }

    @Test func waitingRowsSayWhenTheyAppear() {
        #expect(out(.init(state: .pending, rows: 10, pending: 5, total: 10)).contains("Apps       10 photos from this NAS in the Photolala apps; 5 more at the next publish\n"))
        #expect(out(.init(state: .publishing, rows: 10, pending: 5)).contains("Apps       10 photos from this NAS in the Photolala apps; publishing 5 more now\n"))
        #expect(out(.init(state: .idle)).contains("Apps       no photos from this NAS in the Photolala apps yet\n"))
    }

    @Test func offSaysWhichSettingAndWhatItMeans() {
        #expect(out(.init(state: .off)).contains("Apps       catalog off (catalog.enabled = false): the Photolala apps do not show photos from this NAS\n"))
    }

    @Test func aBlockedCatalogSaysWhyInColourOnATerminal() {
        let c = DaemonStatus.Catalog(state: .blocked, rows: 3, lastError: "the catalog snapshot X is damaged", pending: 2)
        #expect(out(c).contains("Apps       3 photos from this NAS in the Photolala apps; 2 more wait\n           the catalog cannot be read: the catalog snapshot X is damaged\n"))
        #expect(out(c, color: true).contains("\u{1B}[33m           the catalog cannot be read"))
    }

    @Test func aFailedAttemptAndAStoreWithoutConditionalWritesAreShown() {
        let c = DaemonStatus.Catalog(state: .pending, rows: 3, lastError: "publishing the catalog failed: S3 answered 503", pending: 1,
                                     conditionalWrites: false)
        let text = out(c)
        #expect(text.contains("           last attempt failed: publishing the catalog failed: S3 answered 503\n"))
        #expect(text.contains("           the store ignores conditional writes: the catalog pointer is written and read back\n"))
    }
}
