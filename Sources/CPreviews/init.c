// Starting libvips and LibRaw in the preview worker, before its sandbox goes on.
#define _GNU_SOURCE
#include "CPreviews.h"

#include <libraw/libraw.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <vips/vips.h>
#include <vips/vector.h>

// One tiny image through a loader, the thumbnail, the crop and the encoder: whatever a
// library loads or builds on first use (a module, a codec, a table) is loaded now.
static void warm(VipsImage *sample, int kind, int (*save)(VipsImage *, void **, size_t *, ...)) {
    void *bytes = NULL;
    size_t length = 0;
    if (save(sample, &bytes, &length, NULL) != 0) { vips_error_clear(); return; }
    ptm_header header;
    char error[256];
    ptm_image *image = ptm_open_memory(bytes, length, kind, &header, error, sizeof error);
    if (image) {
        ptm_geometry scaled = { 32, 24, 4, 0, 24, 24, 0, 0, 0, 0, 0 };
        ptm_geometry direct = { 32, 24, 4, 0, 24, 24, 1, 8, 0, 48, 48 };
        for (int pass = 0; pass < 2; pass++) {
            if (ptm_render(image, pass ? &direct : &scaled, error, sizeof error) == 0) {
                void *jpeg = NULL;
                size_t jpeg_length = 0;
                if (ptm_encode(image, 85, &jpeg, &jpeg_length, error, sizeof error) == 0) ptm_free_buffer(jpeg);
            }
        }
        ptm_close(image);
    }
    g_free(bytes);
    vips_error_clear();
}

int ptm_library_init(char *error, size_t size) {
    // The time zone is read once, now: localtime_r cannot open it later.
    tzset();
    time_t now = time(NULL);
    struct tm local;
    localtime_r(&now, &local);
    // No run-time code generation (orc) from the start: nothing executable may be written
    // here (and systemd's MemoryDenyWriteExecute would refuse it anyway).
    setenv("VIPS_NOVECTOR", "1", 1);
    if (VIPS_INIT("photolalad-preview")) {
        snprintf(error, size, "libvips did not start: %s", vips_error_buffer());
        return -1;
    }
    // One thread and no operation cache: one photo at a time, memory flat between them.
    vips_concurrency_set(1);
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_vector_set_enabled(FALSE);
    // Only the loaders of the formats the apps show; every other one stays shut.
    vips_block_untrusted_set(TRUE);
    vips_operation_block_set("VipsForeignLoad", TRUE);
    const char *allowed[] = { "VipsForeignLoadJpeg", "VipsForeignLoadPng", "VipsForeignLoadNsgif",
                              "VipsForeignLoadWebp", "VipsForeignLoadTiff", "VipsForeignLoadHeif" };
    for (unsigned i = 0; i < sizeof allowed / sizeof allowed[0]; i++) vips_operation_block_set(allowed[i], FALSE);

    VipsImage *black = NULL, *sample = NULL;
    if (vips_black(&black, 64, 48, "bands", 3, NULL) != 0 || vips_linear1(black, &sample, 1.0, 128.0, "uchar", TRUE, NULL) != 0) {
        snprintf(error, size, "libvips cannot make an image: %s", vips_error_buffer());
        return -1;
    }
    warm(sample, PTM_JPEG, vips_jpegsave_buffer);
    warm(sample, PTM_PNG, vips_pngsave_buffer);
    warm(sample, PTM_GIF, vips_gifsave_buffer);
    warm(sample, PTM_WEBP, vips_webpsave_buffer);
    warm(sample, PTM_TIFF, vips_tiffsave_buffer);
    warm(sample, PTM_HEIF, vips_heifsave_buffer);
    uint8_t rgb[16 * 12 * 3];
    memset(rgb, 90, sizeof rgb);
    char scratch[256];
    ptm_image *pixels = ptm_open_pixels(rgb, 16, 12, scratch, sizeof scratch);
    if (pixels) {
        ptm_geometry g = { 21, 16, 0, 0, 21, 16, 0, 0, 0, 0, 0 };
        ptm_render(pixels, &g, scratch, sizeof scratch);
        ptm_close(pixels);
    }
    g_object_unref(sample);
    g_object_unref(black);
    // LibRaw's parsers, on bytes that are no camera's.
    libraw_data_t *raw = libraw_init(0);
    if (raw) {
        static char junk[4096];
        memcpy(junk, "II*\0\x08\0\0\0", 8);
        if (libraw_open_buffer(raw, junk, sizeof junk) == LIBRAW_SUCCESS) libraw_unpack_thumb(raw);
        libraw_strerror(LIBRAW_FILE_UNSUPPORTED);
        libraw_close(raw);
    }
    vips_error_clear();
    return 0;
}
