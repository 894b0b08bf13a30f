import Control
import RestoreWire

/// `--device NAME|ID`: an id, the start of one (8 characters or more), or a name that only
/// one device has; without it, this NAS.
package enum DeviceChoice {
    package static func pick(_ wanted: String?, from list: DeviceList) -> Result<DeviceList.Device, Failure> {
        let devices = list.devices
        guard let wanted, !wanted.isEmpty else {
            if let mine = devices.first(where: \.current) { return .success(mine) }
            return .failure(.noneForThisNAS(devices.count))
        }
        let w = wanted.lowercased()
        if let exact = devices.first(where: { $0.id == w }) { return .success(exact) }
        let named = devices.filter { $0.name == wanted }
        if named.count == 1 { return .success(named[0]) }
        if named.count > 1 { return .failure(.ambiguous(wanted, named.map(\.id))) }
        if w.count >= 8 {
            let prefixed = devices.filter { $0.id.hasPrefix(w) }
            if prefixed.count == 1 { return .success(prefixed[0]) }
            if prefixed.count > 1 { return .failure(.ambiguous(wanted, prefixed.map(\.id))) }
        }
        return .failure(.unknown(wanted))
    }

    package enum Failure: Error, Equatable, CustomStringConvertible {
        case noneForThisNAS(Int)
        case unknown(String)
        case ambiguous(String, [String])

        package var description: String {
            switch self {
            case .noneForThisNAS(let others):
                others == 0
                    ? "no device of this account has a manifest in the bucket yet"
                    : "this NAS has no manifest in the bucket yet: choose a device with --device (photolalactl devices lists \(others == 1 ? "it" : "them"))"
            case .unknown(let w): "no device named or numbered '\(w)' has a manifest (photolalactl devices lists them)"
            case let .ambiguous(w, ids): "several devices match '\(w)': give one of their ids (\(ids.joined(separator: ", ")))"
            }
        }
    }
}
