// Loading libvips and LibRaw into the preview worker (see decoders.h for why they are not
// linked). Runs before the sandbox goes on: afterwards no file can be opened.
#define _GNU_SOURCE
#define PTM_LIBRARIES_LOADER
#include "decoders.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

struct ptm_functions ptm_libraries;

// "libvips42 is not installed: <dlerror>" when the file is missing; any other failure
// (a damaged or foreign file) is said as it is.
static void *open_library(const char *soname, const char *package, char *error, size_t size) {
    void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (handle) return handle;
    const char *why = dlerror();
    if (!why) why = "unknown error";
    if (strstr(why, "No such file")) {
        snprintf(error, size, "%s is not installed: %s (apt-get install %s)", package, why, package);
    } else {
        snprintf(error, size, "%s cannot be loaded: %s (apt-get install --reinstall %s)", package, why, package);
    }
    return NULL;
}

// dlsym on a handle searches that library and the ones it depends on: GLib's g_free and
// GObject's g_object_unref come through libvips.
static int resolve(void *handle, const char *package, const char *name, void **slot, char *error, size_t size) {
    dlerror();
    void *address = dlsym(handle, name);
    if (!address) {
        snprintf(error, size, "%s lacks %s: it is older than photolalad needs (install Debian 12's %s or newer)",
                 package, name, package);
        return -1;
    }
    *slot = address;
    return 0;
}

int ptm_libraries_load(char *error, size_t size) {
    void *vips = open_library(PTM_VIPS_SONAME, PTM_VIPS_PACKAGE, error, size);
    if (!vips) return -1;
    void *raw = open_library(PTM_RAW_SONAME, PTM_RAW_PACKAGE, error, size);
    if (!raw) return -1;
#define PTM_RESOLVE(library, package, name) \
    if (resolve(library, package, #name, (void **)&ptm_libraries.name, error, size) != 0) return -1;
#define PTM_VIPS(name) PTM_RESOLVE(vips, PTM_VIPS_PACKAGE, name)
#define PTM_RAW(name) PTM_RESOLVE(raw, PTM_RAW_PACKAGE, name)
    PTM_VIPS_FUNCTIONS(PTM_VIPS)
    PTM_RAW_FUNCTIONS(PTM_RAW)
    return 0;
}
