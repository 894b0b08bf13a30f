// libvips and LibRaw as the preview worker sees them: loaded with dlopen by
// ptm_library_init, never linked. The daemon and the worker are one binary; linked, the
// decoders and the ~90 libraries they pull in would be mapped into the daemon too, the
// process that holds the credentials and must stay small on a NAS.
//
// The headers give the types and prototypes; every function the renderer calls is listed
// below and each name is redefined to its entry in `ptm_libraries`, resolved by dlsym.
// A function used but not listed here stays an undefined symbol and the link fails, so
// nothing can quietly bring the libraries back into the binary's NEEDED list.
#pragma once
#include <libraw/libraw.h>
#include <vips/vips.h>
#include <vips/vector.h>

// The sonames each Debian release ships, newest first, and the packages that ship them
// there (debian/control names both as alternatives: one .deb for Debian 12 and 13).
// Debian 13 renamed the packages (the 64-bit time_t transition: libvips42t64,
// libraw23t64) and LibRaw moved to 0.21 (libraw.so.23). The worker loads the first
// soname the system has; a missing library is named by this release's package.
struct ptm_soname { const char *soname; const char *package_t64; const char *package; };
#define PTM_VIPS_SONAMES { { "libvips.so.42", "libvips42t64", "libvips42" } }
#define PTM_RAW_SONAMES { { "libraw.so.23", "libraw23t64", NULL }, { "libraw.so.20", NULL, "libraw20" } }

// LibRaw's C API hands out one struct whose layout changed from 0.20 to 0.21 (fields were
// added before `other`), so the worker reads the photo's time through
// libraw_get_imgother() and only `sizes.flip` directly: its offset is the same in 0.20
// (Debian 12) and 0.21 (Debian 13), measured and asserted in render.c.
#define PTM_RAW_FLIP_OFFSET 40

// libvips, and the GLib/GObject calls reached through it (its own dependencies).
#define PTM_VIPS_FUNCTIONS(X) \
    X(vips_init) X(vips_version) X(vips_error) X(vips_error_buffer) X(vips_error_clear) \
    X(vips_concurrency_set) X(vips_cache_set_max) X(vips_cache_set_max_mem) X(vips_vector_set_enabled) \
    X(vips_block_untrusted_set) X(vips_operation_block_set) \
    X(vips_black) X(vips_linear1) X(vips_copy) X(vips_autorot) X(vips_cast) X(vips_colourspace) X(vips_flatten) \
    X(vips_extract_area) X(vips_thumbnail_image) X(vips_thumbnail_source) \
    X(vips_source_new_from_descriptor) X(vips_source_new_from_memory) X(vips_source_rewind) \
    X(vips_jpegload_source) X(vips_pngload_source) X(vips_gifload_source) X(vips_webpload_source) \
    X(vips_tiffload_source) X(vips_heifload_source) \
    X(vips_jpegsave_buffer) X(vips_pngsave_buffer) X(vips_gifsave_buffer) X(vips_webpsave_buffer) \
    X(vips_tiffsave_buffer) X(vips_heifsave_buffer) \
    X(vips_image_new_from_memory_copy) X(vips_image_copy_memory) X(vips_image_get_typeof) \
    X(vips_image_get_string) X(vips_image_get_orientation) X(vips_image_set_int) X(vips_image_hasalpha) \
    X(vips_array_double_newv) X(vips_area_unref) \
    X(g_free) X(g_object_unref) X(g_log)

#define PTM_RAW_FUNCTIONS(X) \
    X(libraw_init) X(libraw_open_buffer) X(libraw_unpack_thumb) X(libraw_dcraw_make_mem_thumb) \
    X(libraw_dcraw_clear_mem) X(libraw_strerror) X(libraw_close) X(libraw_get_imgother)

struct ptm_functions {
#define PTM_POINTER(name) __typeof__(name) *name;
    PTM_VIPS_FUNCTIONS(PTM_POINTER)
    PTM_RAW_FUNCTIONS(PTM_POINTER)
#undef PTM_POINTER
};

// Filled once, before the sandbox goes on; read-only after that.
extern struct ptm_functions ptm_libraries;

// Loads both libraries and fills `ptm_libraries`. Returns 0, or -1 with `error` saying
// which package is missing or too old.
int ptm_libraries_load(char *error, size_t error_size);

// libraries.c spells the symbols' own names; everyone else calls through the table.
#ifndef PTM_LIBRARIES_LOADER
#define vips_init ptm_libraries.vips_init
#define vips_version ptm_libraries.vips_version
#define vips_error ptm_libraries.vips_error
#define vips_error_buffer ptm_libraries.vips_error_buffer
#define vips_error_clear ptm_libraries.vips_error_clear
#define vips_concurrency_set ptm_libraries.vips_concurrency_set
#define vips_cache_set_max ptm_libraries.vips_cache_set_max
#define vips_cache_set_max_mem ptm_libraries.vips_cache_set_max_mem
#define vips_vector_set_enabled ptm_libraries.vips_vector_set_enabled
#define vips_block_untrusted_set ptm_libraries.vips_block_untrusted_set
#define vips_operation_block_set ptm_libraries.vips_operation_block_set
#define vips_black ptm_libraries.vips_black
#define vips_linear1 ptm_libraries.vips_linear1
#define vips_copy ptm_libraries.vips_copy
#define vips_autorot ptm_libraries.vips_autorot
#define vips_cast ptm_libraries.vips_cast
#define vips_colourspace ptm_libraries.vips_colourspace
#define vips_flatten ptm_libraries.vips_flatten
#define vips_extract_area ptm_libraries.vips_extract_area
#define vips_thumbnail_image ptm_libraries.vips_thumbnail_image
#define vips_thumbnail_source ptm_libraries.vips_thumbnail_source
#define vips_source_new_from_descriptor ptm_libraries.vips_source_new_from_descriptor
#define vips_source_new_from_memory ptm_libraries.vips_source_new_from_memory
#define vips_source_rewind ptm_libraries.vips_source_rewind
#define vips_jpegload_source ptm_libraries.vips_jpegload_source
#define vips_pngload_source ptm_libraries.vips_pngload_source
#define vips_gifload_source ptm_libraries.vips_gifload_source
#define vips_webpload_source ptm_libraries.vips_webpload_source
#define vips_tiffload_source ptm_libraries.vips_tiffload_source
#define vips_heifload_source ptm_libraries.vips_heifload_source
#define vips_jpegsave_buffer ptm_libraries.vips_jpegsave_buffer
#define vips_pngsave_buffer ptm_libraries.vips_pngsave_buffer
#define vips_gifsave_buffer ptm_libraries.vips_gifsave_buffer
#define vips_webpsave_buffer ptm_libraries.vips_webpsave_buffer
#define vips_tiffsave_buffer ptm_libraries.vips_tiffsave_buffer
#define vips_heifsave_buffer ptm_libraries.vips_heifsave_buffer
#define vips_image_new_from_memory_copy ptm_libraries.vips_image_new_from_memory_copy
#define vips_image_copy_memory ptm_libraries.vips_image_copy_memory
#define vips_image_get_typeof ptm_libraries.vips_image_get_typeof
#define vips_image_get_string ptm_libraries.vips_image_get_string
#define vips_image_get_orientation ptm_libraries.vips_image_get_orientation
#define vips_image_set_int ptm_libraries.vips_image_set_int
#define vips_image_hasalpha ptm_libraries.vips_image_hasalpha
#define vips_array_double_newv ptm_libraries.vips_array_double_newv
#define vips_area_unref ptm_libraries.vips_area_unref
#define g_free ptm_libraries.g_free
#define g_object_unref ptm_libraries.g_object_unref
#define g_log ptm_libraries.g_log
#define libraw_init ptm_libraries.libraw_init
#define libraw_open_buffer ptm_libraries.libraw_open_buffer
#define libraw_unpack_thumb ptm_libraries.libraw_unpack_thumb
#define libraw_dcraw_make_mem_thumb ptm_libraries.libraw_dcraw_make_mem_thumb
#define libraw_dcraw_clear_mem ptm_libraries.libraw_dcraw_clear_mem
#define libraw_strerror ptm_libraries.libraw_strerror
#define libraw_close ptm_libraries.libraw_close
#define libraw_get_imgother ptm_libraries.libraw_get_imgother
#endif
