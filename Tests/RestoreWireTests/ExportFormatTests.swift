import RestoreWire
import Testing

/// The extensions an export may write, as the command believes them.
@Suite struct ExportFormatTests {
    @Test func theCommandTakesOnlyTheListedExtensions() {
        #expect(ExportFormat.known("heic") == "heic")
        for bad in ["", "exe", "JPG", "jpg/../..", "jpg\n"] { #expect(ExportFormat.known(bad) == "bin") }
    }
}
