import PhotolalaCore
import Testing
import Web

/// web.md "Every response": the listen address, `localhost` on loopback, `[web] hosts`;
/// anything else (a rebinding attacker's name) is refused.
@Suite struct HostCheckTests {
    let loopback = HostCheck(listen: .init(host: "127.0.0.1", port: 8770), boundPort: 8770, tls: false, hosts: [], localAddresses: [])

    @Test func theListenAddressAndLocalhostOnLoopbackAreAnswered() {
        #expect(loopback.allows("127.0.0.1:8770"))
        #expect(loopback.allows("localhost:8770"))
        #expect(loopback.allows("LOCALHOST:8770"))
        #expect(loopback.allows("localhost.:8770"))
    }

    @Test func foreignNamesOtherPortsAndNoHostAreRefused() {
        #expect(!loopback.allows("evil.example:8770"))
        #expect(!loopback.allows("127.0.0.1:8771"))
        #expect(!loopback.allows("127.0.0.1"))  // port 80 is not the one bound
        #expect(!loopback.allows(nil))
        #expect(!loopback.allows(""))
        #expect(!loopback.allows("127.0.0.1:8770:1"))
        #expect(!loopback.allows("127.0.0.1.evil.example:8770"))
        #expect(!loopback.allows("[::1]:8770"))
    }

    @Test func extraHostsAnswerWithTheBoundPortOrTheirOwn() {
        let check = HostCheck(listen: .init(host: "192.168.1.20", port: 8770), boundPort: 8770, tls: true,
                              hosts: ["nas.local", "proxy.example:443"], localAddresses: [])
        #expect(check.allows("192.168.1.20:8770"))
        #expect(check.allows("nas.local:8770"))
        #expect(check.allows("proxy.example:443"))
        #expect(check.allows("proxy.example"))  // HTTPS without a port is 443
        #expect(!check.allows("proxy.example:8770"))
        #expect(!check.allows("localhost:8770"))  // not on loopback
        #expect(!check.allows("nas.evil:8770"))
    }

    @Test func everyAddressMeansThisMachinesAddresses() {
        let check = HostCheck(listen: .init(host: "0.0.0.0", port: 8770), boundPort: 8770, tls: false, hosts: [],
                              localAddresses: ["10.0.0.5", "fe80::1"])
        #expect(check.allows("10.0.0.5:8770"))
        #expect(check.allows("[fe80::1]:8770"))
        #expect(check.allows("localhost:8770"))
        #expect(!check.allows("10.0.0.6:8770"))
        #expect(!check.allows("nas.local:8770"))
    }

    @Test func ipv6LoopbackListen() {
        let check = HostCheck(listen: .init(host: "::1", port: 9000), boundPort: 9000, tls: false, hosts: [], localAddresses: [])
        #expect(check.allows("[::1]:9000"))
        #expect(check.allows("localhost:9000"))
        #expect(!check.allows("::1:9000"))
    }
}
