/// The kernel's `struct ucred` (pid_t, uid_t, gid_t); Glibc's module hides it behind _GNU_SOURCE.
struct KernelPeerCred: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
