// Most functions are static inline in CLinux.h. The ones here need _GNU_SOURCE, which
// cannot be defined for a header that Swift imports after glibc's module is built.
#define _GNU_SOURCE
#include <errno.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

// Unmaps the resident pages of every executable file mapping (our own code, libc,
// SQLite, OpenSSL): clean text pages that still sit in the page cache, so the next call
// into them is a minor fault and nothing is read from the disk. Only `r-xp` mappings:
// writable or relocated (RELRO) ones hold state and are never touched.
void photolala_release_code_pages(void) {
    FILE *maps = fopen("/proc/self/maps", "re");
    if (!maps) return;
    char line[4096];
    while (fgets(line, sizeof line, maps)) {
        unsigned long start, end;
        char perms[5];
        int path = 0;
        if (sscanf(line, "%lx-%lx %4s %*s %*s %*s %n", &start, &end, perms, &path) < 3) continue;
        if (strcmp(perms, "r-xp") != 0 || path == 0 || line[path] != '/') continue;
        madvise((void *)start, end - start, MADV_DONTNEED);
    }
    fclose(maps);
}

long long photolala_heap_in_use(void) {
    char *text = NULL;
    size_t length = 0;
    FILE *stream = open_memstream(&text, &length);
    if (stream == NULL) return -1;
    int failed = malloc_info(0, stream);
    fclose(stream);
    if (failed != 0 || text == NULL) { free(text); return -1; }
    // The totals over every arena follow the last </heap>.
    const char *totals = text, *next;
    while ((next = strstr(totals, "</heap>")) != NULL) totals = next + 7;
    long long fast = 0, rest = 0, mmapped = 0, current = 0, count = 0;
    const char *at;
    if ((at = strstr(totals, "<total type=\"fast\"")) != NULL) sscanf(at, "<total type=\"fast\" count=\"%lld\" size=\"%lld\"", &count, &fast);
    if ((at = strstr(totals, "<total type=\"rest\"")) != NULL) sscanf(at, "<total type=\"rest\" count=\"%lld\" size=\"%lld\"", &count, &rest);
    if ((at = strstr(totals, "<total type=\"mmap\"")) != NULL) sscanf(at, "<total type=\"mmap\" count=\"%lld\" size=\"%lld\"", &count, &mmapped);
    int found = (at = strstr(totals, "<system type=\"current\"")) != NULL && sscanf(at, "<system type=\"current\" size=\"%lld\"", &current) == 1;
    free(text);
    return found ? current - fast - rest + mmapped : -1;
}
