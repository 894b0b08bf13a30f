import PhotolalaCore
import Testing

@Suite struct SecretRedactorTests {
    /// A token and a part of it (a JWT's payload, registered on its own) are both known:
    /// the token is replaced whole, whichever was registered first.
    @Test(arguments: [false, true])
    func aSecretHoldingAnotherIsReplacedWhole(_ partFirst: Bool) {
        let redactor = SecretRedactor()
        let token = "header0.payload1.signature2"
        for secret in partFirst ? ["payload1", "signature2", token] : [token, "payload1", "signature2"] {
            redactor.register(secret)
        }
        #expect(redactor.redact("refused: \(token) (payload1 alone)") == "refused: [redacted] ([redacted] alone)")
    }

    @Test func shortValuesAndRepeatsAreIgnored() {
        let redactor = SecretRedactor()
        redactor.register("abc")
        redactor.register("secret-1")
        redactor.register("secret-1")
        redactor.register(nil)
        #expect(redactor.redact("abc secret-1") == "abc [redacted]")
    }
}
