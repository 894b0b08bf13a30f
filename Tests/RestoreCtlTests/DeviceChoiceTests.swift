import RestoreWire
import Testing
import RestoreCtl

/// Which device a restore reads, from what `--device` says.
@Suite struct DeviceChoiceTests {
    @Test func devicesAreChosenByIdPrefixOrUniqueName() {
        func device(_ id: String, _ name: String?, current: Bool = false) -> DeviceList.Device {
            DeviceList.Device(id: id, name: name, folders: [], lastBackupAt: nil, files: 0, bytes: 0, current: current, updatedAt: nil)
        }
        let list = DeviceList(devices: [device("aaaaaaaa-1111", "nas", current: true), device("bbbbbbbb-2222", "old"),
                                        device("bbbbbbbb-3333", "twin"), device("cccccccc-4444", "twin")])
        let ids = [nil, "old", "BBBBBBBB-3333", "cccccccc"].map { (try? DeviceChoice.pick($0, from: list).get())?.id }
        #expect(ids == ["aaaaaaaa-1111", "bbbbbbbb-2222", "bbbbbbbb-3333", "cccccccc-4444"])
        #expect(throws: DeviceChoice.Failure.self) { try DeviceChoice.pick("twin", from: list).get() }
        #expect(throws: DeviceChoice.Failure.self) { try DeviceChoice.pick("bbbbbbbb", from: list).get() }
        #expect(throws: DeviceChoice.Failure.self) { try DeviceChoice.pick("bbb", from: list).get() }
        #expect(throws: DeviceChoice.Failure.self) { try DeviceChoice.pick(nil, from: DeviceList(devices: [device("x", "y")])).get() }
    }
}
