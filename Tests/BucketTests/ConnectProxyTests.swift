import Testing
import Bucket

@Suite("where connections go: the target's host and port, the debug proxy")
struct ConnectProxyTests {
    @Test("a certificate diagnosis connects where the request did")
    func connectAddress() throws {
        let aws = try S3Target(.init(bucket: "photolala", region: "us-east-1"))
        #expect(aws.connectHost == "photolala.s3.us-east-1.amazonaws.com" && aws.connectPort == 443)
        let dotted = try S3Target(.init(bucket: "a.b", region: "us-east-1"))
        #expect(dotted.connectHost == "s3.us-east-1.amazonaws.com")
        let local = try S3Target(.init(bucket: "b", region: "r", endpoint: "https://127.0.0.1:8443"))
        #expect(local.connectHost == "127.0.0.1" && local.connectPort == 8443)
        let plain = try S3Target(.init(bucket: "b", region: "r", endpoint: "http://s3.lan"))
        #expect(plain.connectHost == "s3.lan" && plain.connectPort == 80)
        let v6 = try S3Target(.init(bucket: "b", region: "r", endpoint: "https://[::1]:9000"))
        #expect(v6.connectHost == "::1" && v6.connectPort == 9000)
    }

    @Test("the proxy setting is host:port and nothing else")
    func parsing() {
        #expect(ConnectProxy(parsing: "127.0.0.1:3128") == ConnectProxy(host: "127.0.0.1", port: 3128))
        #expect(ConnectProxy(parsing: "proxy.lan:8080") == ConnectProxy(host: "proxy.lan", port: 8080))
        #expect(ConnectProxy(parsing: "127.0.0.1") == nil)
        #expect(ConnectProxy(parsing: ":8080") == nil)
        #expect(ConnectProxy(parsing: "host:0") == nil)
        #expect(ConnectProxy(parsing: "host:70000") == nil)
        #expect(ConnectProxy(parsing: "host:port") == nil)
    }
}
