import Testing
import Vault

@Suite struct RecoveryKeyTests {
    @Test func aNewKeyIsRandomAndReadsBack() throws {
        let a = RecoveryKey.generate()
        let b = RecoveryKey.generate()
        #expect(a != b && a.secret.count == 16)
        let text = a.formatted
        #expect(text.count == 39 && text.split(separator: "-").allSatisfy { $0.count == 4 })
        #expect(!text.contains { "ILOU".contains($0) })
        #expect(try RecoveryKey.parse(text) == a)
        #expect(try RecoveryKey.parse(text.lowercased().replacingOccurrences(of: "-", with: " ")) == a)
    }

    @Test func everyOneCharacterTypoIsCaught() throws {
        let key = RecoveryKey.generate()
        let text = Array(key.formatted.replacingOccurrences(of: "-", with: ""))
        for i in text.indices {
            for c in "0123456789ABCDEFGHJKMNPQRSTVWXYZ" where c != text[i] {
                var typo = text
                typo[i] = c
                #expect(throws: RecoveryKey.ParseError.typo) { try RecoveryKey.parse(String(typo)) }
            }
        }
        // Two neighbours swapped.
        for i in text.indices.dropLast() where text[i] != text[i + 1] {
            var swapped = text
            swapped.swapAt(i, i + 1)
            #expect(throws: RecoveryKey.ParseError.typo) { try RecoveryKey.parse(String(swapped)) }
        }
    }

    @Test func refusalsSaySentencesThatNameTheProblem() {
        let text = RecoveryKey.generate().formatted
        #expect(throws: RecoveryKey.ParseError.character("'U'", position: 1)) { try RecoveryKey.parse("U" + text.dropFirst()) }
        #expect(throws: RecoveryKey.ParseError.character("'é'", position: 3)) { try RecoveryKey.parse("AAé" + text) }
        #expect(throws: RecoveryKey.ParseError.character("U+0000", position: 2)) { try RecoveryKey.parse("A\u{0}" + text) }
        #expect(throws: RecoveryKey.ParseError.length(31)) { try RecoveryKey.parse(String(text.dropLast())) }
        #expect(throws: RecoveryKey.ParseError.length(0)) { try RecoveryKey.parse(" - \n") }
        #expect(RecoveryKey.ParseError.character("'U'", position: 1).description.contains("except I, L, O and U"))
        #expect(RecoveryKey.ParseError.length(31).description.contains("this has 31"))
        #expect(RecoveryKey.ParseError.typo.description.contains("typo"))
    }

    @Test func theKeyIsNeverPrinted() {
        let key = RecoveryKey.generate()
        #expect(!"\(key)".contains(key.formatted) && !String(reflecting: key).contains(key.formatted.prefix(4)))
        let account = AccountKey.generate()
        #expect("\(account)" == "AccountKey(fingerprint \(account.fingerprint))")
    }
}
