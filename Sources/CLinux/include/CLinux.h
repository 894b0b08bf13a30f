// Linux calls Swift cannot reach directly (variadic, or hidden behind _GNU_SOURCE).
#pragma once
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <unistd.h>

// No core dump may hold a token.
static inline int photolala_disable_core_dumps(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

static inline long photolala_gettid(void) {
    return syscall(SYS_gettid);
}

// Lowers this thread's CPU priority: hashing and scanning yield to the NAS's own work.
static inline int photolala_nice_this_thread(int nice) {
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
}
