import Bucket
import Foundation
import PhotolalaCore
import RestoreFiles

extension MirrorService {
    package struct Options: Sendable {
        package var folder: String?
        package var include: Settings.Mirror.Include
        package var onCloudDelete: Settings.Mirror.OnCloudDelete
        package var minFree: Settings.Mirror.FreeSpace
        package var downloadLimit: Int64?
        package var thawArchived: Bool
        /// `owner` as ids (`UInt32.max`: that one unchanged); nil: the daemon's.
        package var owner: (uid: UInt32, gid: UInt32)?
        /// Why `owner` names nobody on this system now (nil: it does, or none is set).
        package var ownerProblem: String?
        package var fileMode: UInt32
        package var dirMode: UInt32
        package var checkInterval: TimeInterval
        package var listInterval: TimeInterval
        package var trust: TLSTrust
        /// Where the catalog's copy goes (the state directory).
        package var scratchDirectory: String
        /// Objects fetched at once; 2 while uploads are under way.
        package var concurrency = 8
        package var whileUploading = 2

        package init(_ settings: Settings) {
            let m = settings.mirror
            folder = m.folder
            include = m.include
            onCloudDelete = m.onCloudDelete
            minFree = m.minFree
            downloadLimit = m.downloadLimit
            thawArchived = m.thawArchived
            fileMode = m.fileMode
            dirMode = m.dirMode
            checkInterval = Units.seconds(m.checkInterval)
            listInterval = Units.seconds(m.listInterval)
            trust = TLSTrust(caFile: settings.tls.caFile)
            scratchDirectory = settings.daemon.stateDir
            if let o = m.owner {
                let names = Identities()
                let uid = o.user.map { UInt32($0) ?? names.user($0) } ?? UInt32.max
                let gid = o.group.map { UInt32($0) ?? names.group($0) } ?? UInt32.max
                if let uid, let gid {
                    owner = (uid, gid)
                } else {
                    ownerProblem = "mirror.owner \(o) names nobody on this system now: the copies keep photolalad's owner"
                }
            }
        }

        var same: [String] {
            [folder ?? "", include.rawValue, onCloudDelete.rawValue, minFree.description, "\(downloadLimit ?? 0)", "\(thawArchived)",
             owner.map { "\($0.uid):\($0.gid)" } ?? "", "\(fileMode)", "\(dirMode)", "\(checkInterval)", "\(listInterval)"]
        }
    }
}
