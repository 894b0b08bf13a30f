import Foundation
import PhotolalaCore
import Testing
import Mirror

@Suite struct MirrorPauseTests {
    @Test func theReasonThatNeedsTheUserMostComesFirst() {
        var f = MirrorPause.Facts(account: "not signed in", userPaused: true, scheduleZero: true, folder: "gone", diskFull: true)
        #expect(MirrorPause.reason(f) == .account)
        f.account = nil
        #expect(MirrorPause.reason(f) == .user)
        f.userPaused = false
        #expect(MirrorPause.reason(f) == .schedule)
        f.scheduleZero = false
        #expect(MirrorPause.reason(f) == .folder)
        f.folder = nil
        #expect(MirrorPause.reason(f) == .diskFull)
        f.diskFull = false
        #expect(MirrorPause.reason(f) == nil)
    }

    @Test func minFreeCountsTheNextCopy() {
        let total: Int64 = 1000
        #expect(FreeSpaceRule.fits(available: 200, total: total, next: 100, minFree: .percent(10)))
        #expect(!FreeSpaceRule.fits(available: 200, total: total, next: 101, minFree: .percent(10)), "100 free is 10% of 1000")
        #expect(FreeSpaceRule.fits(available: 50, total: total, next: 0, minFree: .bytes(50)))
        #expect(!FreeSpaceRule.fits(available: 49, total: total, next: 0, minFree: .bytes(50)))
        #expect(Settings.Mirror.FreeSpace.percent(5).bytes(ofTotal: 1001) == 51, "rounded up: never under the share")
    }

    @Test func aMassTrashIsHeldBack() {
        #expect(TrashGuard.allows(trashing: 20, present: 21), "a few always move")
        #expect(TrashGuard.allows(trashing: 50, present: 100))
        #expect(!TrashGuard.allows(trashing: 51, present: 100))
        #expect(!TrashGuard.allows(trashing: 1000, present: 1000), "an empty listing does not trash the whole mirror")
    }
}
