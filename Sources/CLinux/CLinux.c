// Most functions are static inline in CLinux.h. The ones here need _GNU_SOURCE, which
// cannot be defined for a header that Swift imports after glibc's module is built.
#define _GNU_SOURCE
#include <errno.h>
#include <sys/types.h>
#include <sys/uio.h>
#include "CLinux.h"

ssize_t photolala_pread_cached(int fd, void *buffer, size_t count, off_t offset) {
#ifdef RWF_NOWAIT
    struct iovec iov = { .iov_base = buffer, .iov_len = count };
    return preadv2(fd, &iov, 1, offset, RWF_NOWAIT);
#else
    (void)fd; (void)buffer; (void)count; (void)offset;
    errno = EOPNOTSUPP;
    return -1;
#endif
}
