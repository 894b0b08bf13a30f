import Testing
@testable import RestoreCtl

@Suite struct RestoreSummaryTests {
    @Test func theExitCodeSaysWhetherEveryFileIsThere() {
        var s = RestoreSummary(device: .init(id: "d", name: nil), asOf: nil, dryRun: false, files: 3, bytes: 3, restored: 2, alreadyThere: 1,
                               kept: 0, failed: 0, waitingArchived: 0, problems: [], items: nil, interrupted: false)
        #expect(s.exitCode == 0)
        s.kept = 1
        s.restored = 1
        #expect(s.exitCode == 1)
        s.kept = 0
        s.waitingArchived = 1
        #expect(s.exitCode == 1)
        s.dryRun = true
        #expect(s.exitCode == 0)
    }
}
