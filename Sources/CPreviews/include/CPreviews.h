// The decoding side of previews (libvips, LibRaw) and the sandbox it runs in. Only the
// preview worker process calls the ptm_* and sandbox functions; the daemon calls only
// the spawn and descriptor-passing ones.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// What the decoder found in a photo before decoding its pixels.
typedef struct {
    // Pixels as stored (before the orientation is applied).
    int width;
    int height;
    // EXIF orientation 1…8 (1 when absent).
    int orientation;
    // EXIF DateTimeOriginal ("YYYY:MM:DD HH:MM:SS") and OffsetTimeOriginal ("+09:00"), or "".
    char date_time_original[32];
    char offset_time_original[16];
} ptm_header;

// Where the pixels of a PTM-256 thumbnail come from, in the upright image's coordinates.
typedef struct {
    // The whole upright image scaled to this size (short edge 256)…
    int scaled_width;
    int scaled_height;
    // …then this rectangle of it kept.
    int crop_x, crop_y, crop_width, crop_height;
    // When the scaled image would be too big to hold (an extreme aspect ratio), this
    // rectangle of the upright source is cut first and scaled to the crop's size.
    int direct;
    int source_x, source_y, source_width, source_height;
} ptm_geometry;

// Loader kinds; the daemon sniffed the format and only that loader may read the file.
enum {
    PTM_JPEG = 1, PTM_PNG, PTM_GIF, PTM_WEBP, PTM_TIFF, PTM_HEIF, PTM_RAW, PTM_BMP_PIXELS
};

typedef struct ptm_image ptm_image;

// Loads libvips and LibRaw (dlopen: the binary does not link them, so the daemon never
// maps them), starts them and runs every loader once on a tiny image, so that nothing
// they load lazily (modules, codecs, tables) is left for after the sandbox is on. The
// error is a sentence for the user ("libvips42 is not installed: …").
int ptm_library_init(char *error, size_t error_size);

// Reads the header of the photo behind `fd` with the loader of `kind` (for PTM_RAW: the
// camera's embedded preview). Returns NULL with `error` filled when it cannot.
ptm_image *ptm_open(int fd, int kind, ptm_header *header, char *error, size_t error_size);

// The same for a photo already in memory (the start-up warm-up).
ptm_image *ptm_open_memory(const void *bytes, size_t length, int kind, ptm_header *header, char *error, size_t error_size);

// Decoded RGB (3 bytes a pixel, rows top to bottom) made by the worker itself (BMP).
ptm_image *ptm_open_pixels(const uint8_t *rgb, int width, int height, char *error, size_t error_size);

// Decodes, orients, scales and crops into an 8-bit sRGB image held in memory.
int ptm_render(ptm_image *image, const ptm_geometry *geometry, char *error, size_t error_size);

// Encodes the rendered image as a baseline 4:2:0 JPEG with optimised Huffman tables and
// no metadata. The buffer is freed with ptm_free_buffer.
int ptm_encode(ptm_image *image, int quality, void **out, size_t *length, char *error, size_t error_size);
void ptm_free_buffer(void *buffer);
void ptm_close(ptm_image *image);

// The rendered image's size (after ptm_render).
void ptm_rendered_size(const ptm_image *image, int *width, int *height);

// MARK: the sandbox

// Closes every descriptor but 0, 1, 2 and `keep`, empties the environment, limits the
// address space and the number of descriptors, sets PR_SET_NO_NEW_PRIVS and loads the
// seccomp filter: no file can be opened or stat'ed by name, no socket made or connected,
// no process started, no fcntl, no limit raised; what is not listed fails with EPERM.
// fstat-like calls on a descriptor (newfstatat/statx with an empty path) are answered by
// a SIGSYS handler from fstat(2). Returns 0, or -1 with `error` filled.
int photolala_sandbox_enter(int keep, uint64_t address_space_bytes, char *error, size_t error_size);

// Called by the daemon before each photo: lets worker `pid` use `seconds` more CPU time
// (its RLIMIT_CPU, set from outside: the worker itself may not change its limits; SIGXCPU
// ends it). Returns 0, or -1 with errno set.
int photolala_cpu_budget(pid_t pid, int seconds);

// The self-test's probes (Swift cannot call statx nor the raw system calls): each returns
// what the call returned, with errno set, and the inode it saw.
int photolala_probe_fstatat(int dirfd, const char *path, int empty_path, uint64_t *inode);
int photolala_probe_statx(int dirfd, const char *path, int empty_path, uint64_t *inode);
int photolala_probe_fstat_syscall(int fd, uint64_t *inode);
typedef enum {
    PHOTOLALA_FCNTL_SETOWN, PHOTOLALA_FCNTL_SETSIG, PHOTOLALA_FCNTL_SETFL_ASYNC, PHOTOLALA_FCNTL_GETFD
} photolala_fcntl_probe;
int photolala_probe_fcntl(int fd, photolala_fcntl_probe probe);
// The environment's size (0: empty).
int photolala_environment_count(void);

// Lowest CPU and I/O priority for this process: previews yield to everything else.
void photolala_lowest_priority(void);

// MARK: descriptors over a Unix socket

// Sends `length` bytes with `fd` attached (SCM_RIGHTS); fd < 0 sends none.
ssize_t photolala_send_with_fd(int sock, const void *bytes, size_t length, int fd);
// Receives up to `capacity` bytes and at most one descriptor (*fd = -1 when none came).
ssize_t photolala_receive_with_fd(int sock, void *bytes, size_t capacity, int *fd);

// Starts `path` with `argv` (NULL-terminated), `channel` as its descriptor 3, /dev/null
// as 0 and 1, stderr inherited, in a fresh signal mask. Returns 0 or an errno.
int photolala_spawn(const char *path, char *const argv[], int channel, pid_t *pid);
