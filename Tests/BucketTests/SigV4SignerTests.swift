import Foundation
import Testing
import Bucket

// The vectors and where they come from: SigV4TestVectors.swift.

@Suite("SigV4 signer")
struct SigV4SignerTests {
    @Test("AWS SigV4 test suite", arguments: suiteVectors)
    func awsTestSuite(_ vector: SuiteVector) {
        var signer = SigV4Signer(region: "us-east-1", service: "service")
        signer.usesS3PathRules = vector.s3PathRules
        var credentials = suiteCredentials
        credentials.sessionToken = vector.sessionToken
        let signed = signer.sign(method: vector.method, path: vector.path, query: vector.query,
                                 headers: [.init("Host", "example.amazonaws.com")] + vector.headers,
                                 payloadHash: vector.payloadHash, credentials: credentials, date: suiteDate)
        #expect(signed.canonicalRequest == vector.canonicalRequest)
        #expect(signed.stringToSign == "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
            + vector.stringToSignHash)
        #expect(signed.signature == vector.signature)
        let signedHeaders = vector.canonicalRequest.split(separator: "\n", omittingEmptySubsequences: false).dropLast().last!
        #expect(signed.authorization == "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            + "SignedHeaders=\(signedHeaders), Signature=\(vector.signature)")
    }

    @Test("headers to add: date, authorization, token; no content hash outside S3")
    func headersToAddForGenericService() {
        var credentials = suiteCredentials
        credentials.sessionToken = "token"
        let signed = SigV4Signer(region: "us-east-1", service: "service")
            .sign(method: "GET", path: "/", headers: [.init("Host", "example.amazonaws.com")],
                  payloadHash: SigV4Signer.emptyPayloadHash, credentials: credentials, date: suiteDate)
        #expect(signed.headersToAdd.map(\.name) == ["X-Amz-Date", "X-Amz-Security-Token", "Authorization"])
        #expect(signed.headersToAdd[0].value == "20150830T123600Z")
        #expect(signed.headersToAdd[2].value == signed.authorization)
    }

    // MARK: - S3's documented examples (S3 docs)

    @Test("S3 docs: GET Object with Range")
    func s3GetObject() {
        let signed = SigV4Signer(region: "us-east-1").sign(
            method: "GET", path: "/test.txt",
            headers: [.init("Host", "examplebucket.s3.amazonaws.com"), .init("Range", "bytes=0-9")],
            payloadHash: SigV4Signer.emptyPayloadHash, credentials: s3ExampleCredentials, date: s3ExampleDate)
        #expect(signed.canonicalRequest == [
            "GET",
            "/test.txt",
            "",
            "host:examplebucket.s3.amazonaws.com",
            "range:bytes=0-9",
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "x-amz-date:20130524T000000Z",
            "",
            "host;range;x-amz-content-sha256;x-amz-date",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ].joined(separator: "\n"))
        #expect(signed.stringToSign == [
            "AWS4-HMAC-SHA256",
            "20130524T000000Z",
            "20130524/us-east-1/s3/aws4_request",
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972",
        ].joined(separator: "\n"))
        #expect(signed.signature == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(signed.authorization == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(signed.headersToAdd.map(\.name) == ["X-Amz-Date", "X-Amz-Content-Sha256", "Authorization"])
    }

    @Test("S3 docs: PUT Object, a key with $ encoded once")
    func s3PutObject() {
        // SHA-256 of the example's body, "Welcome to Amazon S3."
        let payloadHash = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"
        // The example's request line is `PUT test$file.text`: an unencoded path is canonicalised too.
        for path in ["/test$file.text", "/" + SigV4Signer.encodePath("test$file.text")] {
            let signed = SigV4Signer(region: "us-east-1").sign(
                method: "PUT", path: path,
                headers: [.init("Host", "examplebucket.s3.amazonaws.com"),
                          .init("Date", "Fri, 24 May 2013 00:00:00 GMT"),
                          .init("x-amz-storage-class", "REDUCED_REDUNDANCY")],
                payloadHash: payloadHash, credentials: s3ExampleCredentials, date: s3ExampleDate)
            #expect(signed.canonicalRequest == [
                "PUT",
                "/test%24file.text",
                "",
                "date:Fri, 24 May 2013 00:00:00 GMT",
                "host:examplebucket.s3.amazonaws.com",
                "x-amz-content-sha256:44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
                "x-amz-date:20130524T000000Z",
                "x-amz-storage-class:REDUCED_REDUNDANCY",
                "",
                "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
                "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
            ].joined(separator: "\n"))
            #expect(signed.stringToSign == [
                "AWS4-HMAC-SHA256",
                "20130524T000000Z",
                "20130524/us-east-1/s3/aws4_request",
                "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d",
            ].joined(separator: "\n"))
            #expect(signed.signature == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")
            #expect(signed.requestTarget == path)
        }
    }

    @Test("S3 docs: GET Bucket Lifecycle, a bare query name")
    func s3GetLifecycle() {
        let signed = SigV4Signer(region: "us-east-1").sign(
            method: "GET", path: "/", query: [.init("lifecycle")],
            headers: [.init("Host", "examplebucket.s3.amazonaws.com")],
            payloadHash: SigV4Signer.emptyPayloadHash, credentials: s3ExampleCredentials, date: s3ExampleDate)
        #expect(signed.canonicalRequest == [
            "GET",
            "/",
            "lifecycle=",
            "host:examplebucket.s3.amazonaws.com",
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "x-amz-date:20130524T000000Z",
            "",
            "host;x-amz-content-sha256;x-amz-date",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ].joined(separator: "\n"))
        #expect(signed.stringToSign.hasSuffix("\n9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca"))
        #expect(signed.signature == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
        #expect(signed.requestTarget == "/?lifecycle")
    }

    @Test("S3 docs: Get Bucket (List Objects), query sorted")
    func s3ListObjects() {
        let signed = SigV4Signer(region: "us-east-1").sign(
            method: "GET", path: "/", query: [.init("prefix", "J"), .init("max-keys", "2")],
            headers: [.init("Host", "examplebucket.s3.amazonaws.com")],
            payloadHash: SigV4Signer.emptyPayloadHash, credentials: s3ExampleCredentials, date: s3ExampleDate)
        #expect(signed.canonicalRequest == [
            "GET",
            "/",
            "max-keys=2&prefix=J",
            "host:examplebucket.s3.amazonaws.com",
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "x-amz-date:20130524T000000Z",
            "",
            "host;x-amz-content-sha256;x-amz-date",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ].joined(separator: "\n"))
        #expect(signed.stringToSign.hasSuffix("\ndf57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7"))
        #expect(signed.signature == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
        #expect(signed.requestTarget == "/?max-keys=2&prefix=J")
    }

    // MARK: - What photolalad sends (botocore)

    @Test("botocore: PutObject with a session token and UNSIGNED-PAYLOAD")
    func photolalaPut() {
        let signed = SigV4Signer(region: "us-east-1").sign(
            method: "PUT",
            path: "/photos/550e8400-e29b-41d4-a716-446655440000/9e107d9d372bb6826bd81d3542a419d6.dat",
            headers: [.init("Host", "photolala.s3.us-east-1.amazonaws.com"),
                      .init("Content-MD5", "nhB9nTcrtoJr2B01QqQZ1g=="), .init("Content-Type", "image/jpeg"),
                      .init("x-amz-meta-original-format", "JPEG"), .init("x-amz-storage-class", "DEEP_ARCHIVE")],
            payloadHash: SigV4Signer.unsignedPayload,
            credentials: S3Credentials(accessKeyId: "AKIAIOSFODNN7EXAMPLE",
                                       secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                       sessionToken: "FQoGZXIvYXdzEXAMPLE//session+token="),
            date: s3ExampleDate)
        #expect(signed.canonicalRequest == """
            PUT
            /photos/550e8400-e29b-41d4-a716-446655440000/9e107d9d372bb6826bd81d3542a419d6.dat

            content-md5:nhB9nTcrtoJr2B01QqQZ1g==
            content-type:image/jpeg
            host:photolala.s3.us-east-1.amazonaws.com
            x-amz-content-sha256:UNSIGNED-PAYLOAD
            x-amz-date:20130524T000000Z
            x-amz-meta-original-format:JPEG
            x-amz-security-token:FQoGZXIvYXdzEXAMPLE//session+token=
            x-amz-storage-class:DEEP_ARCHIVE

            content-md5;content-type;host;x-amz-content-sha256;x-amz-date;x-amz-meta-original-format;x-amz-security-token;x-amz-storage-class
            UNSIGNED-PAYLOAD
            """)
        #expect(signed.stringToSign.hasSuffix("\na50b7e562b9d0fd1c8220607d469fe496004e778ff5f2239681149b023c5b5c8"))
        #expect(signed.signature == "ac0c78736cb5448c3cc7fac08a4554e914fb5043ef66b4be18c9342590585c3e")
        #expect(signed.headersToAdd.map(\.name)
            == ["X-Amz-Date", "X-Amz-Content-Sha256", "X-Amz-Security-Token", "Authorization"])
    }

    @Test("botocore: UploadPart, path-style with a port, a key and an upload id that need encoding")
    func photolalaUploadPart() {
        let key = "photos/u/a b+c%d(é)!'*~.dat"
        let path = "/photolala/" + SigV4Signer.encodePath(key)
        #expect(path == "/photolala/photos/u/a%20b%2Bc%25d%28%C3%A9%29%21%27%2A~.dat")
        let signed = SigV4Signer(region: "us-east-1").sign(
            method: "PUT", path: path,
            query: [.init("uploadId", "2~abc/def+ghi="), .init("partNumber", "3")],
            headers: [.init("Host", "127.0.0.1:5055"), .init("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg==")],
            payloadHash: SigV4Signer.emptyPayloadHash, credentials: s3ExampleCredentials, date: s3ExampleDate)
        #expect(signed.canonicalURI == path)
        #expect(signed.canonicalQuery == "partNumber=3&uploadId=2~abc%2Fdef%2Bghi%3D")
        #expect(signed.stringToSign.hasSuffix("\n6ba429625ae2a661b30a7a19dbf0981fcb65fb102e993129d1da2fe6b5dafc16"))
        #expect(signed.signature == "acd7bfdea3fa1e3a41ba2deb64892d8573deb812085050ba9e07da8491c636b6")
        #expect(signed.requestTarget == path + "?partNumber=3&uploadId=2~abc%2Fdef%2Bghi%3D")
    }

    @Test("botocore: CreateMultipartUpload signs ?uploads as uploads= and sends it bare")
    func photolalaCreateMultipart() {
        let signed = SigV4Signer(region: "us-east-1").sign(
            method: "POST", path: "/photos/u/x.dat", query: [.init("uploads")],
            headers: [.init("Host", "photolala.s3.us-east-1.amazonaws.com"), .init("Content-Type", "video/mp4"),
                      .init("x-amz-meta-original-format", "MP4")],
            payloadHash: SigV4Signer.emptyPayloadHash, credentials: s3ExampleCredentials, date: s3ExampleDate)
        #expect(signed.canonicalQuery == "uploads=")
        #expect(signed.stringToSign.hasSuffix("\nce9a62da886cc1d90f7660f91b75e9b6a42287580361b3d9f16347beb6fa07fe"))
        #expect(signed.signature == "bd8999e466f0ac7eae6d60c09da2559e205f6b36e4b25486a3ef2b66226b9e76")
        #expect(signed.requestTarget == "/photos/u/x.dat?uploads")
    }

    @Test("botocore: other services encode an already-encoded path a second time")
    func genericServiceDoubleEncodes() {
        let signed = SigV4Signer(region: "us-east-1", service: "service").sign(
            method: "GET", path: "/%E1%88%B4", headers: [.init("Host", "example.amazonaws.com")],
            payloadHash: SigV4Signer.emptyPayloadHash, credentials: suiteCredentials, date: suiteDate)
        #expect(signed.canonicalURI == "/%25E1%2588%25B4")
        #expect(signed.signature == "697b34846207a3f72246f99d74ae1ee4fe54f44bb06730c58a0d339eb079596d")
        // S3 does not: the same path is its own canonical form.
        #expect(SigV4Signer(region: "us-east-1").canonicalURI("/%E1%88%B4") == "/%E1%88%B4")
    }

    // MARK: - Encoding rules

    @Test("URI encoding: unreserved kept, everything else %XX upper-case, slash only in paths")
    func uriEncoding() {
        #expect(SigV4Signer.uriEncode("AZaz09-._~", encodeSlash: true) == "AZaz09-._~")
        #expect(SigV4Signer.uriEncode("a b/c", encodeSlash: true) == "a%20b%2Fc")
        #expect(SigV4Signer.uriEncode("a b/c", encodeSlash: false) == "a%20b/c")
        #expect(SigV4Signer.uriEncode("+=&?#%*'()!$,;:@", encodeSlash: true)
            == "%2B%3D%26%3F%23%25%2A%27%28%29%21%24%2C%3B%3A%40")
        #expect(SigV4Signer.uriEncode("é😀", encodeSlash: true) == "%C3%A9%F0%9F%98%80")
    }

    @Test("S3 paths keep dot segments, double slashes and encoded slashes as they are")
    func s3PathsAreNotNormalised() {
        let signer = SigV4Signer(region: "us-east-1")
        #expect(signer.canonicalURI("/bucket/a/../b/./c//d") == "/bucket/a/../b/./c//d")
        #expect(signer.canonicalURI("/bucket/a%2Fb") == "/bucket/a%2Fb")
        #expect(signer.canonicalURI("/bucket/%7e%41") == "/bucket/~A")
        #expect(signer.canonicalURI("") == "/")
        #expect(signer.canonicalURI("/bucket/100%") == "/bucket/100%25")
    }

    @Test("the signing date is UTC, whatever the offset the caller applied")
    func amzDate() {
        #expect(SigV4Signer.amzDate(suiteDate) == "20150830T123600Z")
        #expect(SigV4Signer.amzDate(Date(timeIntervalSince1970: 0.999)) == "19700101T000000Z")
        #expect(SigV4Signer.amzDate(Date(timeIntervalSince1970: 4_102_444_799)) == "20991231T235959Z")
    }

    @Test("passed-in X-Amz-Date and Authorization headers are replaced, not doubled")
    func replacesOwnHeaders() {
        let signed = SigV4Signer(region: "us-east-1", service: "service").sign(
            method: "GET", path: "/",
            headers: [.init("Host", "example.amazonaws.com"), .init("x-amz-date", "19990101T000000Z"),
                      .init("Authorization", "stale")],
            payloadHash: SigV4Signer.emptyPayloadHash, credentials: suiteCredentials, date: suiteDate)
        #expect(signed.signature == "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
    }
}
