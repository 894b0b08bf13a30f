import Foundation
import Testing
import PhotolalaCore

@Suite struct DaemonStatusStagesTests {
    func object(_ s: DaemonStatus) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(s)) as? [String: Any])
    }

    @Test func theStageSectionsOfCliMdArePresentWithNulls() throws {
        let o = try object(DaemonStatus(state: .running))
        let catalog = try #require(o["catalog"] as? [String: Any])
        #expect(catalog["state"] as? String == "off" && catalog["rows"] as? Int == 0 && catalog["publishedAt"] is NSNull)
        let thumbnails = try #require(o["thumbnails"] as? [String: Any])
        #expect(thumbnails["done"] as? Int == 0 && thumbnails["pending"] as? Int == 0 && thumbnails["failed"] as? Int == 0)
        let inventory = try #require(o["inventory"] as? [String: Any])
        #expect(inventory["objects"] as? Int == 0 && inventory["listedAt"] is NSNull)
        let verify = try #require(o["verify"] as? [String: Any])
        #expect(verify["checkedAt"] is NSNull)
        for key in ["checked", "missing", "mismatched"] { #expect(verify[key] as? Int == 0, "verify.\(key)") }
    }

    @Test func filledSectionsRoundTrip() throws {
        var s = DaemonStatus(state: .running)
        s.catalog = .init(state: .published, rows: 58113, publishedAt: "2026-11-22T07:10:00Z")
        s.thumbnails = .init(done: 58001, pending: 110, failed: 2)
        s.inventory = .init(objects: 60212, listedAt: "2026-11-22T03:00:00Z")
        s.verify = .init(checkedAt: "2026-11-22T04:00:00Z", checked: 10, missing: 1, mismatched: 2)
        let back = try JSONDecoder().decode(DaemonStatus.self, from: JSONEncoder().encode(s))
        #expect(back == s)
        #expect(try object(s)["catalog"].flatMap { $0 as? [String: Any] }?["state"] as? String == "published")
    }

    @Test func aMissingOptionalKeyReadsAsNil() throws {
        let json = #"{"state":"idle","rows":3}"#
        let c = try JSONDecoder().decode(DaemonStatus.Catalog.self, from: Data(json.utf8))
        #expect(c.publishedAt == nil && c.lastError == nil && c.rows == 3)
    }
}

@Suite struct DaemonStatusCatalogTests {
    @Test func theCatalogsOwnFieldsRoundTripAndOlderDaemonsReadAsZero() throws {
        let c = DaemonStatus.Catalog(state: .blocked, rows: 4, lastError: "why", pending: 2, total: 9,
                                     checkedAt: "2026-11-22T07:00:00Z", conditionalWrites: false)
        #expect(try JSONDecoder().decode(DaemonStatus.Catalog.self, from: JSONEncoder().encode(c)) == c)
        let o = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(DaemonStatus.Catalog())) as? [String: Any])
        #expect(o["checkedAt"] is NSNull && o["pending"] as? Int == 0 && o["total"] as? Int == 0 && o["conditionalWrites"] as? Bool == true)
        let old = try JSONDecoder().decode(DaemonStatus.Catalog.self, from: Data(#"{"state":"published","rows":3,"publishedAt":null}"#.utf8))
        #expect(old == .init(state: .published, rows: 3))
    }
}
