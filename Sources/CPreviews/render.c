// PTM-256 rendering with libvips (and LibRaw for the camera previews inside RAW files).
// Runs only in the sandboxed preview worker.
#define _GNU_SOURCE
#include "CPreviews.h"
#include "decoders.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// The same binary runs against LibRaw 0.20 and 0.21 (decoders.h): these are the offsets
// both have; headers that disagree fail the build instead of reading the wrong field.
_Static_assert(offsetof(libraw_data_t, sizes.flip) == PTM_RAW_FLIP_OFFSET, "LibRaw moved sizes.flip");
_Static_assert(offsetof(libraw_imgother_t, timestamp) == 16, "LibRaw moved imgother.timestamp");

struct ptm_image {
    int kind;
    VipsSource *source;
    VipsImage *header;
    int orientation;
    libraw_data_t *raw;
    libraw_processed_image_t *preview;
    void *mapping;
    size_t mapping_length;
    VipsImage *rendered;
};

static void vips_failure(char *error, size_t size, const char *what) {
    const char *text = vips_error_buffer();
    size_t n = strcspn(text, "\n");
    snprintf(error, size, "%s: %.*s", what, (int)(n > 300 ? 300 : n), n ? text : "unknown error");
    vips_error_clear();
}

static int load(int kind, VipsSource *source, VipsImage **out) {
    // Truncated or damaged data is an error, not a grey-filled thumbnail.
    switch (kind) {
    case PTM_JPEG:
    case PTM_RAW: return vips_jpegload_source(source, out, "fail_on", VIPS_FAIL_ON_TRUNCATED, NULL);
    case PTM_PNG: return vips_pngload_source(source, out, "fail_on", VIPS_FAIL_ON_TRUNCATED, NULL);
    case PTM_GIF: return vips_gifload_source(source, out, "fail_on", VIPS_FAIL_ON_TRUNCATED, NULL);
    case PTM_WEBP: return vips_webpload_source(source, out, "fail_on", VIPS_FAIL_ON_TRUNCATED, NULL);
    case PTM_TIFF: return vips_tiffload_source(source, out, "fail_on", VIPS_FAIL_ON_TRUNCATED, NULL);
    case PTM_HEIF: return vips_heifload_source(source, out, "fail_on", VIPS_FAIL_ON_TRUNCATED, NULL);
    default: vips_error("ptm", "no loader for kind %d", kind); return -1;
    }
}

static const char *loader_prefix(int kind) {
    switch (kind) {
    case PTM_JPEG: case PTM_RAW: return "jpegload";
    case PTM_PNG: return "pngload";
    case PTM_GIF: return "gifload";
    case PTM_WEBP: return "webpload";
    case PTM_TIFF: return "tiffload";
    case PTM_HEIF: return "heifload";
    default: return "-";
    }
}

static void exif_string(VipsImage *image, const char *field, char *out, size_t size) {
    const char *value = NULL;
    out[0] = 0;
    if (vips_image_get_typeof(image, field) == 0 || vips_image_get_string(image, field, &value) != 0 || !value) {
        vips_error_clear();
        return;
    }
    // libexif renders "2019:01:02 10:11:12 (2019:01:02 10:11:12, ASCII, 20 components, 20 bytes)".
    size_t n = strcspn(value, "(");
    while (n > 0 && value[n - 1] == ' ') n--;
    if (n >= size) n = size - 1;
    memcpy(out, value, n);
    out[n] = 0;
}

static int raw_orientation(int flip) {
    // LibRaw's flip: 3 = 180°, 5 = 90° counter-clockwise, 6 = 90° clockwise.
    switch (flip) { case 3: return 3; case 5: return 8; case 6: return 6; default: return 1; }
}

static int open_raw(ptm_image *image, int fd, ptm_header *header, char *error, size_t size) {
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) { snprintf(error, size, "cannot read the file"); return -1; }
    image->mapping_length = (size_t)st.st_size;
    image->mapping = mmap(NULL, image->mapping_length, PROT_READ, MAP_PRIVATE, fd, 0);
    if (image->mapping == MAP_FAILED) { image->mapping = NULL; snprintf(error, size, "cannot map the file: %s", strerror(errno)); return -1; }
    image->raw = libraw_init(0);
    if (!image->raw) { snprintf(error, size, "LibRaw could not start"); return -1; }
    int rc = libraw_open_buffer(image->raw, image->mapping, image->mapping_length);
    if (rc == LIBRAW_SUCCESS) rc = libraw_unpack_thumb(image->raw);
    if (rc != LIBRAW_SUCCESS) { snprintf(error, size, "LibRaw: %s", libraw_strerror(rc)); return -1; }
    int errc = 0;
    image->preview = libraw_dcraw_make_mem_thumb(image->raw, &errc);
    if (!image->preview || image->preview->type != LIBRAW_IMAGE_JPEG) {
        snprintf(error, size, "the camera embedded no JPEG preview");
        return -1;
    }
    image->source = vips_source_new_from_memory(image->preview->data, image->preview->data_size);
    if (!image->source || load(PTM_JPEG, image->source, &image->header) != 0) {
        vips_failure(error, size, "the embedded preview");
        return -1;
    }
    image->orientation = raw_orientation(image->raw->sizes.flip);
    libraw_imgother_t *other = libraw_get_imgother(image->raw);
    time_t taken = other ? other->timestamp : 0;
    struct tm local;
    // LibRaw read the camera's wall-clock time as local time; written back the same way
    // (the time zone was loaded before the sandbox), the daemon reads it as local time.
    if (taken > 0 && localtime_r(&taken, &local)) {
        strftime(header->date_time_original, sizeof header->date_time_original, "%Y:%m:%d %H:%M:%S", &local);
    }
    return 0;
}

// Reads the header from `source` (taken over) with the loader of `kind`.
static ptm_image *open_source(VipsSource *source, int kind, ptm_header *header, char *error, size_t size) {
    ptm_image *image = calloc(1, sizeof *image);
    if (!image) { if (source) g_object_unref(source); snprintf(error, size, "out of memory"); return NULL; }
    image->kind = kind;
    image->source = source;
    if (!source || load(kind, source, &image->header) != 0) {
        vips_failure(error, size, "cannot read the image");
        ptm_close(image);
        return NULL;
    }
    // libheif has applied the HEIF's own rotation and mirroring already; an EXIF
    // orientation inside a HEIF must not turn it again.
    image->orientation = kind == PTM_HEIF ? 1 : vips_image_get_orientation(image->header);
    exif_string(image->header, "exif-ifd2-DateTimeOriginal", header->date_time_original, sizeof header->date_time_original);
    exif_string(image->header, "exif-ifd2-OffsetTimeOriginal", header->offset_time_original, sizeof header->offset_time_original);
    return image;
}

static void fill_header(ptm_image *image, ptm_header *header) {
    if (image->orientation < 1 || image->orientation > 8) image->orientation = 1;
    header->width = image->header->Xsize;
    header->height = image->header->Ysize;
    header->orientation = image->orientation;
}

ptm_image *ptm_open(int fd, int kind, ptm_header *header, char *error, size_t size) {
    memset(header, 0, sizeof *header);
    ptm_image *image;
    if (kind == PTM_RAW) {
        image = calloc(1, sizeof *image);
        if (!image) { snprintf(error, size, "out of memory"); return NULL; }
        image->kind = kind;
        if (open_raw(image, fd, header, error, size) != 0) { ptm_close(image); return NULL; }
    } else {
        image = open_source(vips_source_new_from_descriptor(fd), kind, header, error, size);
        if (!image) return NULL;
    }
    fill_header(image, header);
    return image;
}

ptm_image *ptm_open_memory(const void *bytes, size_t length, int kind, ptm_header *header, char *error, size_t size) {
    memset(header, 0, sizeof *header);
    ptm_image *image = open_source(vips_source_new_from_memory(bytes, length), kind, header, error, size);
    if (image) fill_header(image, header);
    return image;
}

ptm_image *ptm_open_pixels(const uint8_t *rgb, int width, int height, char *error, size_t size) {
    ptm_image *image = calloc(1, sizeof *image);
    if (!image) { snprintf(error, size, "out of memory"); return NULL; }
    image->kind = PTM_BMP_PIXELS;
    image->orientation = 1;
    image->header = vips_image_new_from_memory_copy(rgb, (size_t)width * height * 3, width, height, 3, VIPS_FORMAT_UCHAR);
    if (!image->header) { vips_failure(error, size, "cannot hold the pixels"); free(image); return NULL; }
    return image;
}

static int has_profile(VipsImage *image) {
    return vips_image_get_typeof(image, VIPS_META_ICC_NAME) != 0;
}

// Applies an EXIF orientation to the pixels.
static int orient(VipsImage *in, int orientation, VipsImage **out) {
    VipsImage *copy = NULL;
    if (vips_copy(in, &copy, NULL) != 0) return -1;
    vips_image_set_int(copy, VIPS_META_ORIENTATION, orientation);
    int rc = vips_autorot(copy, out, NULL);
    g_object_unref(copy);
    return rc;
}

// Alpha flattened on white, 8-bit sRGB (three bands, grey included), held in memory.
static int finish(ptm_image *image, VipsImage *in, char *error, size_t size) {
    VipsImage *t[3] = { NULL, NULL, NULL };
    VipsImage *current = in;
    int rc = 0;
    if (vips_image_hasalpha(current)) {
        VipsArrayDouble *white = vips_array_double_newv(1, 255.0 * (current->BandFmt == VIPS_FORMAT_USHORT ? 257 : 1));
        rc = vips_flatten(current, &t[0], "background", white, NULL);
        vips_area_unref(VIPS_AREA(white));
        current = t[0];
    }
    if (rc == 0) { rc = vips_colourspace(current, &t[1], VIPS_INTERPRETATION_sRGB, NULL); current = t[1]; }
    if (rc == 0) { rc = vips_cast(current, &t[2], VIPS_FORMAT_UCHAR, NULL); current = t[2]; }
    if (rc == 0) {
        image->rendered = vips_image_copy_memory(current);
        if (!image->rendered) rc = -1;
    }
    for (int i = 0; i < 3; i++) if (t[i]) g_object_unref(t[i]);
    if (rc != 0) vips_failure(error, size, "cannot decode the image");
    return rc;
}

int ptm_render(ptm_image *image, const ptm_geometry *g, char *error, size_t size) {
    VipsImage *t[4] = { NULL, NULL, NULL, NULL };
    int swap = image->orientation >= 5;
    int rc;
    if (!g->direct) {
        // Shrink-on-load: the JPEG decoder skips what the thumbnail does not need. The
        // size asked is before the rotation, which is applied to the small result.
        int w = swap ? g->scaled_height : g->scaled_width, h = swap ? g->scaled_width : g->scaled_height;
        if (image->kind == PTM_BMP_PIXELS) {
            rc = vips_thumbnail_image(image->header, &t[0], w, "height", h, "size", VIPS_SIZE_FORCE, "no_rotate", TRUE, NULL);
        } else {
            rc = vips_source_rewind(image->source);
            // An embedded profile is converted to sRGB; without one the pixels already are
            // sRGB, and asking for the conversion anyway shifts their colours.
            // 8.14's thumbnail_source does not hand its own fail_on to the loader; the option string does.
            if (rc == 0 && has_profile(image->header))
                rc = vips_thumbnail_source(image->source, &t[0], w, "height", h, "size", VIPS_SIZE_FORCE, "no_rotate", TRUE,
                                           "export_profile", "srgb", "option_string", "fail_on=truncated", NULL);
            else if (rc == 0)
                rc = vips_thumbnail_source(image->source, &t[0], w, "height", h, "size", VIPS_SIZE_FORCE, "no_rotate", TRUE,
                                           "option_string", "fail_on=truncated", NULL);
            // vips_thumbnail_source picks its loader by the bytes: it must be the one the
            // daemon chose by the same bytes (the others are blocked anyway).
            const char *loader = NULL;
            if (rc == 0 && (vips_image_get_string(t[0], VIPS_META_LOADER, &loader) != 0 || !loader ||
                            strncmp(loader, loader_prefix(image->kind), strlen(loader_prefix(image->kind))) != 0)) {
                vips_error("ptm", "read by %s, not as the format its first bytes say", loader ? loader : "an unknown loader");
                rc = -1;
            }
        }
        if (rc == 0) rc = orient(t[0], image->orientation, &t[1]);
        if (rc == 0) rc = vips_extract_area(t[1], &t[2], g->crop_x, g->crop_y, g->crop_width, g->crop_height, NULL);
    } else {
        // An extreme aspect ratio (or pixels the worker decoded): cut the kept part of
        // the upright source first, then scale only that.
        rc = orient(image->header, image->orientation, &t[0]);
        if (rc == 0) rc = vips_extract_area(t[0], &t[1], g->source_x, g->source_y, g->source_width, g->source_height, NULL);
        if (rc == 0 && has_profile(image->header))
            rc = vips_thumbnail_image(t[1], &t[2], g->crop_width, "height", g->crop_height,
                                      "size", VIPS_SIZE_FORCE, "no_rotate", TRUE, "export_profile", "srgb", NULL);
        else if (rc == 0)
            rc = vips_thumbnail_image(t[1], &t[2], g->crop_width, "height", g->crop_height,
                                      "size", VIPS_SIZE_FORCE, "no_rotate", TRUE, NULL);
    }
    if (rc != 0) {
        for (int i = 0; i < 4; i++) if (t[i]) g_object_unref(t[i]);
        vips_failure(error, size, "cannot decode the image");
        return -1;
    }
    rc = finish(image, t[2], error, size);
    for (int i = 0; i < 4; i++) if (t[i]) g_object_unref(t[i]);
    return rc;
}

int ptm_encode(ptm_image *image, int quality, void **out, size_t *length, char *error, size_t size) {
    if (!image->rendered) { snprintf(error, size, "nothing rendered"); return -1; }
    // Baseline (not interlaced), optimised Huffman tables, 4:2:0 at every quality, and no
    // metadata at all: no profile, no EXIF, so no orientation tag.
    if (vips_jpegsave_buffer(image->rendered, out, length, "Q", quality, "optimize_coding", TRUE,
                             "interlace", FALSE, "strip", TRUE,
                             "subsample_mode", VIPS_FOREIGN_SUBSAMPLE_ON, NULL) != 0) {
        vips_failure(error, size, "cannot encode the thumbnail");
        return -1;
    }
    return 0;
}

void ptm_free_buffer(void *buffer) { g_free(buffer); }

void ptm_rendered_size(const ptm_image *image, int *width, int *height) {
    *width = image->rendered ? image->rendered->Xsize : 0;
    *height = image->rendered ? image->rendered->Ysize : 0;
}

void ptm_close(ptm_image *image) {
    if (!image) return;
    if (image->rendered) g_object_unref(image->rendered);
    if (image->header) g_object_unref(image->header);
    if (image->source) g_object_unref(image->source);
    if (image->preview) libraw_dcraw_clear_mem(image->preview);
    if (image->raw) libraw_close(image->raw);
    if (image->mapping) munmap(image->mapping, image->mapping_length);
    free(image);
}
