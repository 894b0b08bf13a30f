#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PhotolalaCore

/// Who is on the other end of the socket, from SO_PEERCRED (the kernel's word, not the client's).
package struct PeerCredentials: Sendable, Equatable {
    package var pid: Int32
    package var uid: UInt32
    package var gid: UInt32

    package init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    /// Whether the peer has `group` as primary or supplementary group. SO_PEERCRED carries
    /// only the primary one, so the supplementary groups come from the peer process itself
    /// (/proc/PID/status, what `newgrp`/`setpriv` really gave it), then from the group database.
    package func isMember(ofGroup group: UInt32) -> Bool {
        if gid == group { return true }
        if let groups = Self.processGroups(pid: pid), groups.contains(group) { return true }
        var pwd = passwd()
        var result: UnsafeMutablePointer<passwd>? = nil
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &pwd, &buffer, buffer.count, &result) == 0, result != nil, let name = pwd.pw_name else {
            return false
        }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(name, pwd.pw_gid, &groups, &count) == -1 {
            groups = [gid_t](repeating: 0, count: Int(count))
            guard getgrouplist(name, pwd.pw_gid, &groups, &count) != -1 else { return false }
        }
        return groups.prefix(Int(count)).contains(group)
    }
}

extension PeerCredentials {
    /// The peer as the kernel checks its permissions: its uid, and its primary and
    /// supplementary groups (those of the process, else the group database's).
    package var accessCaller: PathAccess.Caller {
        var groups: Set<UInt32> = [gid]
        if let own = Self.processGroups(pid: pid) {
            groups.formUnion(own)
        } else {
            groups.formUnion(Self.databaseGroups(uid: uid, gid: gid))
        }
        return PathAccess.Caller(uid: uid, groups: groups)
    }

    static func databaseGroups(uid: UInt32, gid: UInt32) -> [UInt32] {
        var pwd = passwd()
        var result: UnsafeMutablePointer<passwd>? = nil
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &pwd, &buffer, buffer.count, &result) == 0, result != nil, let name = pwd.pw_name else { return [] }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(name, gid, &groups, &count) == -1 {
            groups = [gid_t](repeating: 0, count: Int(count))
            guard getgrouplist(name, gid, &groups, &count) != -1 else { return [] }
        }
        return Array(groups.prefix(Int(count)))
    }

    static func processGroups(pid: Int32) -> [UInt32]? {
        guard pid > 0, let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("Groups:") {
            return line.dropFirst("Groups:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { UInt32($0) }
        }
        return nil
    }
}

/// Decides read and write access on the socket (cli.md "The control socket").
package struct AccessPolicy: Sendable {
    package var daemonUID: UInt32
    /// nil when `daemon.socket_group` does not exist: then only root and the daemon's user get in.
    package var readerGroup: UInt32?
    package var readerGroupName: String

    package init(daemonUID: UInt32, readerGroup: UInt32?, readerGroupName: String) {
        self.daemonUID = daemonUID
        self.readerGroup = readerGroup
        self.readerGroupName = readerGroupName
    }

    /// Root and the daemon's own user: may do everything, and have connection slots kept for them.
    package func isPrivileged(_ peer: PeerCredentials) -> Bool {
        peer.uid == 0 || peer.uid == daemonUID
    }

    package func allows(_ access: ControlRoute.Access, peer: PeerCredentials) -> Bool {
        if access == .root { return peer.uid == 0 }
        if isPrivileged(peer) { return true }
        switch access {
        case .write, .trail, .root: return false
        case .read:
            guard let readerGroup else { return false }
            return peer.isMember(ofGroup: readerGroup)
        }
    }

    /// What to tell a refused peer: which group or which user would get in.
    package func refusal(_ access: ControlRoute.Access) -> String {
        switch access {
        case .read: "permission denied: join the group '\(readerGroupName)' to read the daemon's status (sudo usermod -aG \(readerGroupName) $USER, then log in again)"
        case .write: "permission denied: changing photolalad needs root or the daemon's user (try sudo photolalactl ...)"
        case .trail: "permission denied: the audit trail is for root and the daemon's user only (try sudo photolalactl audit)"
        case .root: "permission denied: the audit trail's verification key is shown to root only (try sudo photolalactl audit --verification-key)"
        }
    }
}
