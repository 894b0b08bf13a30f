// Linux calls Swift cannot reach directly (variadic, or hidden behind _GNU_SOURCE).
#pragma once
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <unistd.h>
#include <malloc.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <fcntl.h>

// No core dump may hold a token. The Swift runtime's crash handler goes too: it prints
// the bytes around every register (which may be a token's) to the journal, and on a
// non-dumpable process it can keep a crashed daemon alive instead of letting systemd
// restart it. A crash now ends the process at once, with no core.
static inline int photolala_disable_core_dumps(void) {
    const int crashes[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGQUIT, SIGSYS };
    for (unsigned i = 0; i < sizeof crashes / sizeof crashes[0]; i++) signal(crashes[i], SIG_DFL);
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

// Renames without replacing (renameat2 with RENAME_NOREPLACE, which glibc hides behind
// _GNU_SOURCE): fails with EEXIST when `newpath` exists, so a restore never overwrites a
// file that appeared meanwhile. EINVAL where the filesystem cannot do it.
static inline int photolala_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, 1u);
}

// Starts writing `count` bytes from `offset` of `fd` back to disk without waiting
// (sync_file_range with SYNC_FILE_RANGE_WRITE, hidden behind _GNU_SOURCE): the mirror
// calls it as a copy arrives, so the fdatasync before its rename finds little left to do.
static inline int photolala_start_writeback(int fd, long long offset, long long count) {
    return (int)syscall(SYS_sync_file_range, fd, offset, count, 2u);
}

// Turns O_DIRECT (hidden behind _GNU_SOURCE; glibc's __O_DIRECT is each architecture's
// value) on or off for an open file: 0, or -1 with errno (EINVAL where the filesystem
// cannot do it).
static inline int photolala_set_direct(int fd, int on) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    flags = on ? (flags | __O_DIRECT) : (flags & ~__O_DIRECT);
    return fcntl(fd, F_SETFL, flags);
}

static inline long photolala_gettid(void) {
    return syscall(SYS_gettid);
}

// Names this thread in ps, top and /proc (the kernel keeps the first 15 bytes).
// Foundation's Thread.name does not reach the kernel on Linux: unnamed threads keep the
// name of the thread that created them, and the hashers showed up as "…root.default-qos".
static inline void photolala_name_this_thread(const char *name) {
    prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

// Lowers this thread's CPU priority: hashing and scanning yield to the NAS's own work.
static inline int photolala_nice_this_thread(int nice) {
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
}

// glibc gives every thread that allocates its own arena (up to 8 per core), each keeping
// freed memory: a daemon with a dozen threads then holds far more than it uses. Two
// arenas and an eager trim keep RSS close to the live heap.
static inline void photolala_tune_malloc(void) {
    mallopt(M_ARENA_MAX, 2);
    mallopt(M_TRIM_THRESHOLD, 1 << 20);
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
}

// Gives the heap's free memory back to the system (the top of each arena and whole free
// pages inside them): after a burst of work (a first scan), what the burst freed.
static inline void photolala_trim_malloc(void) {
    malloc_trim(0);
}

// The bytes the heap holds for live allocations, over every arena (mallinfo2 sees the
// main arena alone): malloc_info's totals, system memory less its free chunks, plus
// mmapped chunks. -1 if they cannot be read. Tests use it to see memory given back.
long long photolala_heap_in_use(void);

// Unmaps the resident pages of the process's executable file mappings (its code and
// its libraries' code). The kernel maps code around every fault, and with large folios
// whole megabytes of it: after start-up most of a 40 MB text segment counts in RSS
// though nothing runs it again. The pages stay in the page cache; what runs again comes
// back as a minor fault.
void photolala_release_code_pages(void);

// Reads only what is already in the page cache, never waiting for the disk
// (preadv2 with RWF_NOWAIT, Linux 4.14+). Returns the bytes read (possibly fewer than
// asked, 0 at the end of the file), or -1 with errno EAGAIN when the data at `offset`
// is not cached, EOPNOTSUPP (or EINVAL, ENOSYS) where the kernel or filesystem cannot
// tell. Tells the hasher whether the pages it reads were cached before it came.
ssize_t photolala_pread_cached(int fd, void *buffer, size_t count, off_t offset);

// Opens `path` below the folder `dirfd` without ever leaving it or following a symbolic
// link at any step (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, Linux 5.6+): what
// a restore writes can never be steered outside its root. -1 with errno ENOSYS where the
// kernel (or a seccomp filter) lacks openat2: the caller then walks name by name with
// O_NOFOLLOW. `flags` must not create (no mode is passed).
#include <errno.h>
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#endif
static inline int photolala_openat2_beneath(int dirfd, const char *path, int flags) {
#if defined(SYS_openat2) && defined(RESOLVE_BENEATH)
    struct open_how how = { .flags = (unsigned long long)(unsigned)flags, .mode = 0,
                            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
#else
    (void)dirfd; (void)path; (void)flags;
    errno = ENOSYS;
    return -1;
#endif
}

// Whether a folder carries a POSIX ACL (its access ACL is an extended attribute): the
// control socket then shows its names to its owner only (PathAccess).
static inline int photolala_has_acl(const char *path) {
    return getxattr(path, "system.posix_acl_access", NULL, 0) >= 0;
}
