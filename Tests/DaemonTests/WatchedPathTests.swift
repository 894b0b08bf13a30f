import Foundation
import Testing
import Daemon

/// A path given to `photolalactl files`, mapped into the queue's terms.
@Suite struct WatchedPathTests {
    let folders = ["/srv/photos", "/home/ann/Pictures"]

    @Test func aPathUnderAWatchedFolderIsTakenAsItIs() {
        #expect(WatchedPath.resolve("/srv/photos/2024/a.jpg", folders: folders, realPath: { _ in nil }) == "/srv/photos/2024/a.jpg")
        #expect(WatchedPath.resolve("/srv/photos/", folders: folders, realPath: { _ in nil }) == "/srv/photos")
    }

    @Test func aPathOutsideIsRefused() {
        #expect(WatchedPath.resolve("/srv/photos2/a.jpg", folders: folders, realPath: { $0 }) == nil)
        #expect(WatchedPath.resolve("/etc/passwd", folders: folders, realPath: { $0 }) == nil)
        #expect(WatchedPath.resolve("relative.jpg", folders: folders, realPath: { $0 }) == nil)
    }

    @Test func aPathThroughASymlinkIsMappedBackByItsRealPath() {
        // /volume1/photos is where /srv/photos really is; the user names it that way.
        let real: (String) -> String? = { $0.replacingOccurrences(of: "/srv/photos", with: "/volume1/photos") }
        #expect(WatchedPath.resolve("/volume1/photos/a.jpg", folders: folders, realPath: real) == "/srv/photos/a.jpg")
    }
}
