import Control
import ManifestFormat
import RestoreWire

/// What the manifests this NAS can open say of the objects an export writes (privacy.md
/// "No side doors": export checks the SHA-256). An object is named by its MD5, and MD5
/// collisions are practical; wherever a device's sealed manifest records the SHA-256 of
/// the bytes with that MD5 (and their size), the export checks the object against it too.
///
/// Only sealed segments count (`readable` devices, opened by the daemon with the account
/// key, read again here): a plaintext manifest proves nothing, and anyone who can write
/// the bucket could make one record whatever they like. Only the MD5s the export writes
/// are kept, so memory grows with the export (about 100 bytes a photo), not the manifests.
package struct ExportDigests: Sendable {
    struct Known: Sendable, Equatable {
        /// nil: two manifests record different sizes for this MD5 (no one bound).
        var size: Int64?
        /// nil: no manifest records one, or two record different ones (a collision between
        /// two real files of the account, or a NAS of the account forging: either way no
        /// one value has the last word, and the object is checked by its MD5 alone).
        var sha256: SHA256Value?
    }

    private(set) var known: [MD5Value: Known] = [:]
    /// Devices whose manifest could not be read whole for this (named in the summary).
    private(set) var unread: [String] = []
    /// MD5s two manifests disagree about: never given a value again.
    private var conflicted: Set<MD5Value> = []

    package init() {}

    /// Every entry of a readable device's segments, for the MD5s in `wanted`.
    package mutating func add(_ entries: [ManifestEntry], wanted: Set<MD5Value>) {
        for entry in entries {
            guard let v = entry.version, wanted.contains(v.md5), !conflicted.contains(v.md5) else { continue }
            guard var k = known[v.md5] else {
                known[v.md5] = Known(size: v.size, sha256: v.sha256)
                continue
            }
            if k.size != v.size || (k.sha256 != nil && v.sha256 != nil && k.sha256 != v.sha256) {
                conflicted.insert(v.md5)
                k = Known(size: k.size == v.size ? k.size : nil, sha256: nil)
            } else if k.sha256 == nil {
                k.sha256 = v.sha256
            }
            known[v.md5] = k
        }
    }

    /// The manifests of every readable device, through the daemon (`GET /v1/restore/manifest`).
    static func read(client: ControlClient, devices: DeviceList, wanted: Set<MD5Value>) throws(RestoreRun.Stop) -> ExportDigests {
        var digests = ExportDigests()
        guard !wanted.isEmpty else { return digests }
        var streaming = client
        streaming.timeout = 120
        for device in devices.devices where device.access == .readable {
            var frames = ManifestFrames.Reader()
            var whole = true
            let answer: ControlClient.StreamAnswer
            do {
                answer = try streaming.stream(.manifest, query: ["device": device.id]) { bytes in
                    for frame in try frames.feed(bytes) {
                        // 'P': a sealed segment the daemon opened and checked ('S', a
                        // plaintext format-1 one, proves nothing and is not sent for a
                        // readable device).
                        guard case .plaintext(let opened) = frame else { continue }
                        guard let segment = try? ManifestSegment.decode(plaintext: opened) else {
                            whole = false
                            continue
                        }
                        // What was read of a refused or cut-short manifest was still sealed: it counts.
                        digests.add(segment.entries, wanted: wanted)
                    }
                }
            } catch let failure as ControlClient.Failure {
                throw .control(failure)
            } catch {
                digests.unread.append(device.name ?? device.id)
                continue
            }
            if !(200..<300).contains(answer.status) || !answer.complete || !whole { digests.unread.append(device.name ?? device.id) }
        }
        return digests
    }
}
