import Foundation
import Testing
import Bucket

@Suite struct CertificateProblemTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)   // 2027-01-15 08:00 UTC

    func peer(names: [String] = ["s3.example"], from: TimeInterval = -86400, until: TimeInterval = 86400,
              issuer: String = "CN=Private CA") -> PeerCertificate {
        PeerCertificate(subject: "CN=s3.example", issuer: issuer, names: names,
                        notBefore: now + from, notAfter: now + until)
    }

    @Test func datesComeFirstWhateverElseIsWrong() {
        let expired = peer(until: -60)
        #expect(CertificateProblem.diagnose(.wrongHost, peer: expired, now: now) == .expired(notAfter: now - 60, now: now))
        #expect(CertificateProblem.diagnose(.certificateRejected, peer: expired, now: now) == .expired(notAfter: now - 60, now: now))
        let early = peer(from: 60)
        #expect(CertificateProblem.diagnose(.certificateRejected, peer: early, now: now) == .notYetValid(notBefore: now + 60, now: now))
    }

    @Test func aValidCertificateIsEitherForAnotherHostOrFromAnUnknownCA() {
        #expect(CertificateProblem.diagnose(.wrongHost, peer: peer(), now: now) == .wrongHost(names: ["s3.example"]))
        #expect(CertificateProblem.diagnose(.certificateRejected, peer: peer(), now: now)
            == .untrusted(issuer: "CN=Private CA", selfSigned: false))
        let selfSigned = PeerCertificate(subject: "CN=nas", issuer: "CN=nas", names: [], notBefore: now - 1, notAfter: now + 1)
        #expect(CertificateProblem.diagnose(.certificateRejected, peer: selfSigned, now: now)
            == .untrusted(issuer: "CN=nas", selfSigned: true))
    }

    @Test func withoutTheCertificateTheSentenceStillSaysWhatToCheck() {
        let problem = CertificateProblem.diagnose(.certificateRejected, peer: nil, now: now)
        #expect(problem == .unexplained(.certificateRejected))
        let text = problem.sentence(host: "s3.example", caFile: nil)
        #expect(text.hasPrefix("certificate for s3.example is not trusted: its chain did not verify"))
        #expect(text.contains("tls.ca_file") && text.contains("clock"))
    }

    @Test func sentencesNameTheDatesInUTCAndTheFile() {
        let expired = CertificateProblem.expired(notAfter: now - 86400, now: now).sentence(host: "h", caFile: nil)
        #expect(expired.contains("it expired on 2027-01-14 08:00 UTC and this machine's clock says 2027-01-15 08:00 UTC"))
        let untrusted = CertificateProblem.untrusted(issuer: "CN=X", selfSigned: true).sentence(host: "h", caFile: "/etc/ca.pem")
        #expect(untrusted.contains("it is self-signed (CN=X)") && untrusted.contains("tls.ca_file (/etc/ca.pem)"))
        let noNames = CertificateProblem.wrongHost(names: []).sentence(host: "h", caFile: nil)
        #expect(noNames.contains("it is for no host name at all, not h"))
    }

    @Test func boringSSLReasonsAreReadFromTheErrorText() {
        let text = "sslError([Error: 268435581 error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at "
            + "/x/handshake.cc:393, Error: 1 error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER at /y.cc:1])"
        #expect(TLSFailure.reasons(in: text) == ["CERTIFICATE_VERIFY_FAILED", "WRONG_VERSION_NUMBER"])
        #expect(TLSFailure.reasons(in: "no stack") == [])
    }

    @Test func aPeerCertificateIsReadFromItsDER() throws {
        let identity = try TestCA("Reader CA").issue(["127.0.0.1", "nas.local"])
        let read = try PeerCertificate(der: identity.der)
        #expect(read.names == ["127.0.0.1", "nas.local"])
        #expect(read.issuer == "CN=Reader CA")
        #expect(read.subject == "CN=127.0.0.1")
        #expect(!read.selfIssued)
        #expect(PeerCertificate.address([0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1]) == "2001:db8:0:0:0:0:0:1")
    }
}
