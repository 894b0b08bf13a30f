// Loading libvips and LibRaw into the preview worker (see decoders.h for why they are not
// linked). Runs before the sandbox goes on: afterwards no file can be opened.
#define _GNU_SOURCE
#define PTM_LIBRARIES_LOADER
#include "decoders.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ptm_functions ptm_libraries;

// Debian 13 and Ubuntu 24.04 ship the decoders under new package names (the 64-bit time_t
// transition): a missing library is named by the package this release has. Read from
// os-release (Debian testing and sid have no VERSION_ID: they are past the transition).
static int t64_release(void) {
    FILE *f = fopen("/etc/os-release", "re");
    if (!f) f = fopen("/usr/lib/os-release", "re");
    if (!f) return 0;
    char line[256], id[64] = "", version[64] = "";
    while (fgets(line, sizeof line, f)) {
        char *target = NULL;
        if (strncmp(line, "ID=", 3) == 0) target = id;
        else if (strncmp(line, "VERSION_ID=", 11) == 0) target = version;
        if (!target) continue;
        const char *value = strchr(line, '=') + 1;
        size_t n = 0;
        for (; *value && *value != '\n' && n < 63; value++) {
            if (*value != '"' && *value != '\'') target[n++] = *value;
        }
        target[n] = 0;
    }
    fclose(f);
    if (strcmp(id, "debian") == 0 || strcmp(id, "raspbian") == 0) return version[0] == 0 || atoi(version) >= 13;
    if (strcmp(id, "ubuntu") == 0) return atoi(version) > 24 || (atoi(version) == 24 && strncmp(version, "24.04", 5) >= 0);
    return 0;
}

// A soname's package on this release (Debian 12's name, or Debian 13's when it renamed it).
static const char *release_package(const struct ptm_soname *soname, int t64) {
    const char *named = t64 ? soname->package_t64 : soname->package;
    return named ? named : (t64 ? soname->package : soname->package_t64);
}

// The first of `candidates` (newest first) this system has. When none loads: "libvips42 is
// not installed: <dlerror>" with this release's package and its own soname's error when the
// file is missing; any other failure (a damaged or foreign file) is said as it is.
static void *open_library(const struct ptm_soname *candidates, size_t count, const char **package,
                          char *error, size_t size) {
    int t64 = t64_release();
    size_t mine = 0;
    for (size_t i = 0; i < count; i++) {
        if (t64 ? candidates[i].package_t64 : candidates[i].package) { mine = i; break; }
    }
    char why[512] = "unknown error";
    for (size_t i = 0; i < count; i++) {
        void *handle = dlopen(candidates[i].soname, RTLD_NOW | RTLD_LOCAL);
        if (handle) {
            *package = release_package(&candidates[i], t64);
            return handle;
        }
        const char *e = dlerror();
        if (i == mine && e) snprintf(why, sizeof why, "%s", e);
    }
    *package = release_package(&candidates[mine], t64);
    if (strstr(why, "No such file")) {
        snprintf(error, size, "%s is not installed: %s (apt-get install %s)", *package, why, *package);
    } else {
        snprintf(error, size, "%s cannot be loaded: %s (apt-get install --reinstall %s)", *package, why, *package);
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
    static const struct ptm_soname vips_sonames[] = PTM_VIPS_SONAMES;
    static const struct ptm_soname raw_sonames[] = PTM_RAW_SONAMES;
    const char *vips_package = NULL, *raw_package = NULL;
    void *vips = open_library(vips_sonames, sizeof vips_sonames / sizeof *vips_sonames, &vips_package, error, size);
    if (!vips) return -1;
    void *raw = open_library(raw_sonames, sizeof raw_sonames / sizeof *raw_sonames, &raw_package, error, size);
    if (!raw) return -1;
#define PTM_RESOLVE(library, package, name) \
    if (resolve(library, package, #name, (void **)&ptm_libraries.name, error, size) != 0) return -1;
#define PTM_VIPS(name) PTM_RESOLVE(vips, vips_package, name)
#define PTM_RAW(name) PTM_RESOLVE(raw, raw_package, name)
    PTM_VIPS_FUNCTIONS(PTM_VIPS)
    PTM_RAW_FUNCTIONS(PTM_RAW)
    return 0;
}
