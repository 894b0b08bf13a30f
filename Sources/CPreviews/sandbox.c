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
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

extern char **environ;

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
    ALLOW(close); ALLOW(dup); ALLOW(fstat); ALLOW(fcntl);
    // glibc's fstat is newfstatat(fd, "", AT_EMPTY_PATH).
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(newfstatat), 1,
                           SCMP_A3(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, AT_EMPTY_PATH));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(statx), 1,
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
    ALLOW(sigaltstack); ALLOW(getpid); ALLOW(gettid); ALLOW(getrandom); ALLOW(getrusage);
    ALLOW(clock_gettime); ALLOW(clock_getres); ALLOW(gettimeofday); ALLOW(clock_nanosleep); ALLOW(nanosleep);
    ALLOW(eventfd2);
    // abort() signals itself; never another process.
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid()));
    // The per-photo CPU budget, and thread names.
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2,
                           SCMP_A0(SCMP_CMP_EQ, 0), SCMP_A1(SCMP_CMP_EQ, RLIMIT_CPU));
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
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail(error, size, "PR_SET_NO_NEW_PRIVS", errno);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    return load_filter(error, size);
}

int photolala_cpu_budget(int seconds) {
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) != 0) return -1;
    rlim_t used = (rlim_t)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + 1);
    struct rlimit now;
    if (getrlimit(RLIMIT_CPU, &now) != 0) return -1;
    struct rlimit next = { used + (rlim_t)seconds, now.rlim_max };
    if (now.rlim_max != RLIM_INFINITY && next.rlim_cur > now.rlim_max) next.rlim_cur = now.rlim_max;
    return setrlimit(RLIMIT_CPU, &next);
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
    rc = posix_spawn(pid, path, &actions, &attributes, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (moved >= 0) close(moved);
    return rc;
}
