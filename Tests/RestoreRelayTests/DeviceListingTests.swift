import Control
import Foundation
import ManifestFormat
import PhotolalaCore
import RestoreWire
import Testing
import Vault
import RestoreRelay

@Suite struct DeviceListingTests {
    let key = AccountKey.generate()
    let nas = ManifestKeys(userId: "U", deviceId: "nas")

    func record(_ name: String, counter: Int64? = nil) -> DeviceRecord {
        DeviceRecord(deviceId: "nas", name: name, folders: ["/srv/photos"], lastBackupAt: "2026-11-22T07:00:00Z", files: 3, bytes: 30,
                     logSeq: 1, snapshotSeq: 0, updatedAt: "2026-11-22T07:00:00Z", software: "photolalad test",
                     counter: counter, head: counter.map { _ in ManifestHead(seq: 1, sha256: String(repeating: "0", count: 64)) })
    }

    func row(_ seen: DeviceListing.Seen, _ bytes: [UInt8]?, _ state: MetadataKeyState) -> (device: DeviceList.Device, counter: Int64?) {
        DeviceListing.row("nas", seen, current: false, record: bytes, recordKey: nas.record, keyState: state)
    }

    @Test func theListingIsGroupedByDeviceWithItsRecordSealingAndNewestChange() {
        let old = ManifestKeys(userId: "U", deviceId: "old")
        let listing = [
            ListedObject(key: nas.record, size: 1, etag: "", lastModified: Date(timeIntervalSince1970: 100)),
            ListedObject(key: nas.log(1), size: 1, etag: "", lastModified: Date(timeIntervalSince1970: 300)),
            ListedObject(key: old.plaintext.log(1), size: 1, etag: "", lastModified: Date(timeIntervalSince1970: 200)),
            ListedObject(key: "photos/U/0123.dat", size: 1, etag: ""),
        ]
        let found = DeviceListing(listing, userId: "U")
        #expect(found.seen == [
            "nas": .init(record: true, sealed: true, changed: Date(timeIntervalSince1970: 300)),
            "old": .init(record: false, sealed: false, changed: Date(timeIntervalSince1970: 200)),
        ])
    }

    @Test func eachFormatAndKeyStateGivesItsAccess() throws {
        let sealed = DeviceListing.Seen(record: true, sealed: true)
        let plain = row(.init(record: true), record("plain").encoded(), .needed)
        #expect(plain.device.access == .unencrypted && plain.device.name == "plain" && plain.device.files == 3 && plain.counter == nil)

        let noKey = row(sealed, record("x", counter: 4).sealed(key: key.metadataKey, objectKey: nas.record), .needed)
        #expect(noKey.device.access == .keyNeeded && noKey.device.name == nil && noKey.counter == nil)

        let opened = row(sealed, record("sealed", counter: 4).sealed(key: key.metadataKey, objectKey: nas.record), .ready(key))
        #expect(opened.device.access == .readable && opened.device.name == "sealed" && opened.device.problem == nil)
        // The caller holds it against the counter it remembers: a rollback shows there.
        #expect(opened.counter == 4)

        let missing = row(DeviceListing.Seen(sealed: true), nil, .ready(key))
        #expect(missing.device.access == .readable && missing.device.problem == "its device record is missing")

        // Sealed for another object (or with another key): it does not open.
        let moved = row(sealed, record("x", counter: 4).sealed(key: key.metadataKey, objectKey: "elsewhere"), .ready(key))
        #expect(moved.device.access == .unreadable && moved.device.problem == DeviceListing.notReadable("nas") && moved.counter == nil)

        // 0x03 is format 2's record with the wrapped key (issue 31): 0x04 is the first unknown.
        let newer = row(sealed, Array(SealedObject.magic.prefix(7)) + [4, 0, 0], .ready(key))
        #expect(newer.device.access == .unreadable && newer.device.format == 4)
        #expect(newer.device.problem == "its manifest is in format 4, newer than this photolalad reads: update photolalad")
    }

    @Test func thisNASComesFirstThenTheNewestAndTheNoteOnlyWhenAKeyIsNeeded() {
        func device(_ id: String, current: Bool = false, backup: String? = nil, changed: String? = nil,
                    access: DeviceList.Device.Access = .readable) -> DeviceList.Device {
            var d = DeviceList.Device(id: id, name: nil, folders: [], lastBackupAt: backup, files: 0, bytes: 0, current: current,
                                      updatedAt: nil, changedAt: changed)
            d.access = access
            return d
        }
        let list = [device("a", backup: "2025-01-01T00:00:00Z"), device("b", changed: "2026-01-01T00:00:00Z", access: .keyNeeded),
                    device("me", current: true, backup: "2020-01-01T00:00:00Z"), device("c", backup: "2024-01-01T00:00:00Z")]
        #expect(DeviceListing.sorted(list).map(\.id) == ["me", "b", "a", "c"])
        #expect(DeviceListing.note(list, keyState: .needed)?.hasSuffix(DeviceListing.enterHint) == true)
        #expect(DeviceListing.note(list, keyState: .unreadable("the key object is missing"))
                == "encrypted manifests cannot be read: the key object is missing")
        #expect(DeviceListing.note(list.filter { $0.access != .keyNeeded }, keyState: .needed) == nil)
    }
}
