import Testing
import RestoreFiles

@Suite struct ConflictRuleTests {
    @Test func whatStandsThereDecides() {
        #expect(ConflictRule.decide(.nothing, size: 10, overwrite: false) == .write)
        #expect(ConflictRule.decide(.file(size: 10), size: 10, overwrite: false) == .compare)
        #expect(ConflictRule.decide(.file(size: 10), size: 10, overwrite: true) == .compare)
        #expect(ConflictRule.decide(.file(size: 9), size: 10, overwrite: true) == .replace)
        #expect(ConflictRule.decide(.link, size: 10, overwrite: true) == .replace)
        for existing in [ConflictRule.Existing.file(size: 9), .link, .folder, .other("a named pipe (FIFO)")] {
            guard case .keep = ConflictRule.decide(existing, size: 10, overwrite: false) else {
                Issue.record("\(existing) should be kept")
                continue
            }
        }
        // A folder, a FIFO or a device is never replaced, not even with --overwrite; what it is is said.
        guard case .keep = ConflictRule.decide(.folder, size: 10, overwrite: true) else { Issue.record("a folder replaced"); return }
        #expect(ConflictRule.decide(.other("a device"), size: 10, overwrite: true) == .keep("a device is there: left alone, not opened"))
    }

    @Test func sameBytesAreAlreadyThere() {
        #expect(ConflictRule.compared(sameBytes: true, overwrite: false) == .alreadyThere)
        #expect(ConflictRule.compared(sameBytes: true, overwrite: true) == .alreadyThere)
        #expect(ConflictRule.compared(sameBytes: false, overwrite: true) == .replace)
        guard case .keep(let why) = ConflictRule.compared(sameBytes: false, overwrite: false) else { Issue.record("not kept"); return }
        #expect(why.contains("--overwrite"))
    }
}
