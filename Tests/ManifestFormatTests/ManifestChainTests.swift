import Foundation
import Testing
import ManifestFormat

@Suite struct ManifestChainTests {
    let layout = ManifestKeys(userId: "U", deviceId: "d")

    @Test func keysFollowTheDocumentedLayout() {
        #expect(layout.record == "metadata/U/devices/d/device.json")
        // Format 2 (sealed) segments end in .pls; format 1's .plm are another layout.
        #expect(layout.log(42) == "metadata/U/devices/d/log/000000000042.pls")
        #expect(layout.snapshotPart(42, part: 3) == "metadata/U/devices/d/snapshot/000000000042/000003.pls")
        #expect(layout.snapshotIndex(42) == "metadata/U/devices/d/snapshot/000000000042/index.pls")
        #expect(layout.plaintext.log(42) == "metadata/U/devices/d/log/000000000042.plm")
        #expect(layout.plaintext.snapshotIndex(42) == "metadata/U/devices/d/snapshot/000000000042/index.plm")
        #expect(layout.plaintext.record == layout.record && ManifestKeys.isPlaintextSegment(layout.plaintext.log(1)))
        #expect(ManifestKeys.deviceOf(key: layout.record, userId: "U")! == ("d", true))
        #expect(ManifestKeys.deviceOf(key: layout.log(1), userId: "U")! == ("d", false))
        #expect(ManifestKeys.deviceOf(key: "metadata/V/devices/d/device.json", userId: "U") == nil)
    }

    @Test func logsAloneFromTheFirst() {
        let chain = ManifestChain(keys: [layout.record, layout.log(1), layout.log(2), layout.log(3)], layout: layout)
        #expect(chain.snapshot == nil && chain.logs == [1, 2, 3] && chain.lastSeq == 3)
        #expect(chain.gapAt == nil && chain.stale.isEmpty)
    }

    @Test func theNewestCompleteSnapshotThenTheLogAfterIt() {
        let keys = [layout.log(3), layout.log(4), layout.log(5), layout.log(6),
                    layout.snapshotPart(2, part: 1), layout.snapshotIndex(2),
                    layout.snapshotPart(4, part: 1), layout.snapshotPart(4, part: 2), layout.snapshotIndex(4),
                    layout.snapshotPart(6, part: 1)]   // being written: no index yet
        let chain = ManifestChain(keys: keys, layout: layout)
        #expect(chain.snapshot == 4 && chain.logs == [5, 6] && chain.lastSeq == 6)
        #expect(Set(chain.stale) == Set([layout.log(3), layout.log(4), layout.snapshotPart(2, part: 1), layout.snapshotIndex(2)]))
    }

    @Test func aGapStopsTheChain() {
        let chain = ManifestChain(keys: [layout.log(1), layout.log(2), layout.log(4), layout.log(5)], layout: layout)
        #expect(chain.logs == [1, 2] && chain.gapAt == 3 && chain.beyondGap == [4, 5] && chain.lastSeq == 2)
    }

    @Test func theOtherFormatsObjectsAreNotPartOfTheChain() {
        let keys = [layout.plaintext.log(1), layout.plaintext.log(2), layout.log(1)]
        #expect(ManifestChain(keys: keys, layout: layout).logs == [1])
        #expect(ManifestChain(keys: keys, layout: layout.plaintext).logs == [1, 2])
    }

    @Test func otherDevicesAndStrayKeysAreIgnored() {
        let other = ManifestKeys(userId: "U", deviceId: "e")
        let chain = ManifestChain(keys: [other.log(1), layout.prefix + "log/notanumber.plm", layout.prefix + "x", layout.log(1)], layout: layout)
        #expect(chain.logs == [1] && chain.stale.isEmpty)
    }
}
