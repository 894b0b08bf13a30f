/// The S3 storage classes whose objects must be brought back (`RestoreObject`) before
/// they can be read, and how long that usually takes (AWS's figures for the Standard
/// retrieval tier the daemon asks for).
package enum ArchiveClass {
    package static func needsThaw(_ storageClass: String?) -> Bool {
        guard let storageClass else { return false }
        return storageClass == "GLACIER" || storageClass == "DEEP_ARCHIVE"
    }

    package static func typicalWait(_ storageClass: String) -> String {
        switch storageClass {
        case "GLACIER": "usually 3 to 5 hours"
        case "DEEP_ARCHIVE": "usually within 12 hours"
        default: "usually minutes"
        }
    }
}
