// The preview worker's sandbox and the descriptor passing between it and the daemon.
#define _GNU_SOURCE
#include "CPreviews.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/ioprio.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static int fail(char *error, size_t size, const char *what, int code) {
    snprintf(error, size, "%s: %s", what, strerror(code));
    return -1;
}

static void close_all_but(int keep) {
    // close_range (Linux 5.9+) closes the daemon's inherited sockets and files in one call.
    if (keep > 3 && syscall(SYS_close_range, 3u, (unsigned)keep - 1, 0u) != 0) {
        for (int fd = 3; fd < keep; fd++) close(fd);
    }
    if (syscall(SYS_close_range, (unsigned)keep + 1, ~0u, 0u) != 0) {
        struct rlimit r;
        long top = getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY ? (long)r.rlim_cur : 4096;
        for (long fd = keep + 1; fd < top; fd++) close((int)fd);
    }
}

// MARK: stat without a path
//
// glibc's fstat() is newfstatat(fd, "", buf, AT_EMPTY_PATH), and a seccomp filter cannot
// read the path string: allowed on AT_EMPTY_PATH alone, newfstatat and statx would stat
// any named file. So the filter traps them (SIGSYS) and this handler answers from
// fstat(2) on the descriptor when the path is empty, EPERM otherwise: no path ever
// reaches the kernel, whatever the worker's memory holds (docs/decisions.md).

#if defined(__x86_64__)
static const int argument_registers[] = { REG_RDI, REG_RSI, REG_RDX, REG_R10, REG_R8, REG_R9 };
#define SYSCALL_ARG(uc, n) ((uc)->uc_mcontext.gregs[argument_registers[n]])
#define SYSCALL_RESULT(uc) ((uc)->uc_mcontext.gregs[REG_RAX])
#elif defined(__aarch64__)
#define SYSCALL_ARG(uc, n) ((uc)->uc_mcontext.regs[n])
#define SYSCALL_RESULT(uc) ((uc)->uc_mcontext.regs[0])
#else
#error "the preview sandbox's SIGSYS handler knows x86_64 and aarch64 only"
#endif

// si_code of a SIGSYS from a seccomp filter (linux/signal.h; glibc 2.36 does not name it).
#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1
#endif

// The flags an fstat-like call may carry with its empty path; nothing else is answered.
#define EMPTY_PATH_FLAGS (AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT)
#define STATX_EMPTY_PATH_FLAGS (EMPTY_PATH_FLAGS | AT_STATX_SYNC_TYPE)

static long raw_fstat(long fd, struct stat *buf) {
    long rc = syscall(SYS_fstat, fd, buf);
    return rc < 0 ? -errno : 0;
}

static int is_empty(const char *path) {
    // NULL is what Linux 6.11+ takes for an empty path with AT_EMPTY_PATH.
    return path == NULL || path[0] == 0;
}

static long emulate_statx(long fd, struct statx *out) {
    struct stat st;
    long rc = raw_fstat(fd, &st);
    if (rc != 0) return rc;
    memset(out, 0, sizeof *out);
    out->stx_mask = STATX_BASIC_STATS;
    out->stx_blksize = (uint32_t)st.st_blksize;
    out->stx_nlink = (uint32_t)st.st_nlink;
    out->stx_uid = st.st_uid;
    out->stx_gid = st.st_gid;
    out->stx_mode = (uint16_t)st.st_mode;
    out->stx_ino = st.st_ino;
    out->stx_size = (uint64_t)st.st_size;
    out->stx_blocks = (uint64_t)st.st_blocks;
    out->stx_atime = (struct statx_timestamp){ st.st_atim.tv_sec, (uint32_t)st.st_atim.tv_nsec, 0 };
    out->stx_ctime = (struct statx_timestamp){ st.st_ctim.tv_sec, (uint32_t)st.st_ctim.tv_nsec, 0 };
    out->stx_mtime = (struct statx_timestamp){ st.st_mtim.tv_sec, (uint32_t)st.st_mtim.tv_nsec, 0 };
    out->stx_rdev_major = major(st.st_rdev);
    out->stx_rdev_minor = minor(st.st_rdev);
    out->stx_dev_major = major(st.st_dev);
    out->stx_dev_minor = minor(st.st_dev);
    return 0;
}

static void on_sigsys(int signal, siginfo_t *info, void *context) {
    (void)signal;
    // Only the filter's traps are answered; a SIGSYS sent by kill() changes nothing.
    if (info->si_code != SYS_SECCOMP) return;
    ucontext_t *uc = context;
    int saved = errno;
    long fd = (long)(int)SYSCALL_ARG(uc, 0);
    const char *path = (const char *)SYSCALL_ARG(uc, 1);
    long result = -EPERM;
    if (info->si_syscall == SYS_newfstatat) {
        long flags = (long)(int)SYSCALL_ARG(uc, 3);
        if ((flags & AT_EMPTY_PATH) && !(flags & ~EMPTY_PATH_FLAGS) && is_empty(path)) {
            result = raw_fstat(fd, (struct stat *)SYSCALL_ARG(uc, 2));
        }
    } else if (info->si_syscall == SYS_statx) {
        long flags = (long)(int)SYSCALL_ARG(uc, 2);
        if ((flags & AT_EMPTY_PATH) && !(flags & ~STATX_EMPTY_PATH_FLAGS) && is_empty(path)) {
            result = emulate_statx(fd, (struct statx *)SYSCALL_ARG(uc, 4));
        }
    }
    SYSCALL_RESULT(uc) = result;
    errno = saved;
}

// MARK: the filter

#define ALLOW(name) rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(name), 0)

static int load_filter(char *error, size_t size) {
    // Everything not listed fails with EPERM: a decoder that tries anything else gets an
    // error it can report, and nothing it was not given can be reached.
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!ctx) return fail(error, size, "seccomp_init", ENOMEM);
    int rc = 0;
    // Every thread the libraries already started gets the same filter.
    rc |= seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
    // Reading the photo and talking to the daemon, over descriptors it already holds.
    ALLOW(read); ALLOW(readv); ALLOW(pread64); ALLOW(preadv); ALLOW(lseek);
    ALLOW(write); ALLOW(writev);
    ALLOW(recvmsg); ALLOW(sendmsg); ALLOW(recvfrom); ALLOW(poll); ALLOW(ppoll);
    ALLOW(close); ALLOW(dup); ALLOW(fstat);
    // No fcntl at all: traced on every format (docs/decisions.md), libvips, LibRaw, GLib
    // and the worker make none once started, and F_SETOWN/F_SETSIG/O_ASYNC could make the
    // kernel signal another process as this user.
    // fstat-like calls with an empty path go to on_sigsys; with a path they fail.
    rc |= seccomp_rule_add(ctx, SCMP_ACT_TRAP, SCMP_SYS(newfstatat), 1,
                           SCMP_A3(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, AT_EMPTY_PATH));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_TRAP, SCMP_SYS(statx), 1,
                           SCMP_A2(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, AT_EMPTY_PATH));
    // Memory, never executable (no code may be written and run).
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    ALLOW(munmap); ALLOW(mremap); ALLOW(madvise); ALLOW(brk);
    // Threads of this process only (glibc tries clone3 first: ENOSYS sends it to clone).
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    ALLOW(futex); ALLOW(set_robust_list); ALLOW(rseq); ALLOW(sched_yield); ALLOW(sched_getaffinity);
    ALLOW(exit); ALLOW(exit_group); ALLOW(rt_sigreturn); ALLOW(rt_sigaction); ALLOW(rt_sigprocmask);
    ALLOW(sigaltstack); ALLOW(getpid); ALLOW(gettid); ALLOW(getrandom);
    ALLOW(clock_gettime); ALLOW(clock_getres); ALLOW(gettimeofday); ALLOW(clock_nanosleep); ALLOW(nanosleep);
    ALLOW(eventfd2);
    // abort() signals itself; never another process.
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid()));
    // Its own limits may be read, never set: the filter cannot see whether a new limit is
    // lower, so the daemon sets the per-photo CPU limit from outside (photolala_cpu_budget).
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2,
                           SCMP_A0(SCMP_CMP_EQ, 0), SCMP_A2(SCMP_CMP_EQ, 0));
    // Thread names.
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME));
    if (rc != 0) {
        seccomp_release(ctx);
        return fail(error, size, "seccomp_rule_add", EINVAL);
    }
    int loaded = seccomp_load(ctx);
    seccomp_release(ctx);
    return loaded == 0 ? 0 : fail(error, size, "seccomp_load", -loaded);
}

int photolala_sandbox_enter(int keep, uint64_t address_space_bytes, char *error, size_t size) {
    close_all_but(keep);
    struct rlimit as = { address_space_bytes, address_space_bytes };
    if (setrlimit(RLIMIT_AS, &as) != 0) return fail(error, size, "RLIMIT_AS", errno);
    struct rlimit zero = { 0, 0 };
    // No file may grow (there is none to write, but should one be reachable), no core.
    setrlimit(RLIMIT_FSIZE, &zero);
    setrlimit(RLIMIT_CORE, &zero);
    // A photo's descriptor at a time, plus what the libraries keep (eventfds, dups).
    struct rlimit files = { 64, 64 };
    setrlimit(RLIMIT_NOFILE, &files);
    // Whatever the libraries set at start-up goes too: the worker holds nothing it was not handed.
    clearenv();
    // SA_NODEFER: a trap inside the handler must not find SIGSYS blocked (the kernel
    // would then kill the worker instead of calling it).
    struct sigaction trap = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO | SA_NODEFER };
    sigemptyset(&trap.sa_mask);
    if (sigaction(SIGSYS, &trap, NULL) != 0) return fail(error, size, "sigaction SIGSYS", errno);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail(error, size, "PR_SET_NO_NEW_PRIVS", errno);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    return load_filter(error, size);
}

int photolala_cpu_budget(pid_t pid, int seconds) {
    clockid_t clock;
    struct timespec used;
    struct rlimit now;
    int rc = clock_getcpuclockid(pid, &clock);
    if (rc != 0) { errno = rc; return -1; }
    if (clock_gettime(clock, &used) != 0) return -1;
    if (prlimit(pid, RLIMIT_CPU, NULL, &now) != 0) return -1;
    // +1: the soft limit counts whole seconds; what was used is cut down to one.
    rlim_t soft = (rlim_t)used.tv_sec + 1 + (rlim_t)seconds;
    if (now.rlim_max != RLIM_INFINITY && soft > now.rlim_max) soft = now.rlim_max;
    struct rlimit next = { soft, now.rlim_max };
    return prlimit(pid, RLIMIT_CPU, &next, NULL);
}

// MARK: the self-test's probes

int photolala_probe_fstatat(int dirfd, const char *path, int empty_path, uint64_t *inode) {
    struct stat st;
    int rc = fstatat(dirfd, path, &st, empty_path ? AT_EMPTY_PATH : 0);
    if (rc == 0) *inode = st.st_ino;
    return rc;
}

int photolala_probe_statx(int dirfd, const char *path, int empty_path, uint64_t *inode) {
    struct statx stx;
    int rc = statx(dirfd, path, empty_path ? AT_EMPTY_PATH : 0, STATX_BASIC_STATS, &stx);
    if (rc == 0) *inode = stx.stx_ino;
    return rc;
}

int photolala_probe_fstat_syscall(int fd, uint64_t *inode) {
    struct stat st;
    int rc = (int)syscall(SYS_fstat, fd, &st);
    if (rc == 0) *inode = st.st_ino;
    return rc;
}

int photolala_probe_fcntl(int fd, photolala_fcntl_probe probe) {
    int rc = -1;
    switch (probe) {
    case PHOTOLALA_FCNTL_SETOWN: rc = fcntl(fd, F_SETOWN, getpid()); break;
    case PHOTOLALA_FCNTL_SETSIG: rc = fcntl(fd, F_SETSIG, SIGUSR1); break;
    case PHOTOLALA_FCNTL_SETFL_ASYNC: rc = fcntl(fd, F_SETFL, O_ASYNC); break;
    case PHOTOLALA_FCNTL_GETFD: rc = fcntl(fd, F_GETFD); break;
    }
    return rc;
}

int photolala_environment_count(void) {
    int n = 0;
    for (char **e = environ; e && *e; e++) n++;
    return n;
}

void photolala_lowest_priority(void) {
    setpriority(PRIO_PROCESS, 0, 19);
    syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0));
}

ssize_t photolala_send_with_fd(int sock, const void *bytes, size_t length, int fd) {
    struct iovec iov = { (void *)bytes, length };
    union { struct cmsghdr header; char space[CMSG_SPACE(sizeof(int))]; } control;
    struct msghdr message = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (fd >= 0) {
        memset(&control, 0, sizeof control);
        message.msg_control = control.space;
        message.msg_controllen = sizeof control.space;
        struct cmsghdr *c = CMSG_FIRSTHDR(&message);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    ssize_t n;
    do { n = sendmsg(sock, &message, MSG_NOSIGNAL); } while (n < 0 && errno == EINTR);
    return n;
}

ssize_t photolala_receive_with_fd(int sock, void *bytes, size_t capacity, int *fd) {
    struct iovec iov = { bytes, capacity };
    union { struct cmsghdr header; char space[CMSG_SPACE(sizeof(int) * 4)]; } control;
    struct msghdr message = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space,
                              .msg_controllen = sizeof control.space };
    *fd = -1;
    ssize_t n;
    do { n = recvmsg(sock, &message, MSG_CMSG_CLOEXEC); } while (n < 0 && errno == EINTR);
    if (n < 0) return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < count; i++) {
            int received;
            memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            // One descriptor a request: any more are closed, never used.
            if (*fd < 0) *fd = received; else close(received);
        }
    }
    return n;
}

int photolala_spawn(const char *path, char *const argv[], int channel, pid_t *pid) {
    // dup2 onto itself would keep close-on-exec set: move the channel out of the way first.
    int moved = -1;
    if (channel == 3) {
        moved = fcntl(channel, F_DUPFD_CLOEXEC, 10);
        if (moved < 0) return errno;
        channel = moved;
    }
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int rc = posix_spawn_file_actions_init(&actions);
    if (rc && moved >= 0) close(moved);
    if (rc) return rc;
    posix_spawnattr_init(&attributes);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &all);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    // dup2 clears close-on-exec on the copy: only this end of the pair reaches the worker.
    posix_spawn_file_actions_adddup2(&actions, channel, 3);
    // An empty environment: nothing of the daemon's (its variables, a token an operator
    // exported, LD_* or GLib/libvips settings) reaches the process that parses photos.
    char *const empty[] = { NULL };
    rc = posix_spawn(pid, path, &actions, &attributes, argv, empty);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (moved >= 0) close(moved);
    return rc;
}
