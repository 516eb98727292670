#include "vips_shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vips/vips.h>

// libvips is loaded with dlopen at the first thumbnail, not linked: it brings some ninety shared
// libraries, whose loading from a cold disk was most of a mount's start (0.2 s) for a program that
// may never make a thumbnail. Each call goes through a pointer of the function's own type (variadic
// ones included), found once by vaultaire_vips_start. glib and gobject are linked as usual.
#define VIPS_CALLS(X)                                                                                          \
    X(vips_init) X(vips_version) X(vips_cache_set_max) X(vips_cache_set_max_mem) X(vips_cache_set_max_files)  \
    X(vips_block_untrusted_set) X(vips_concurrency_set) X(vips_foreign_find_load_buffer)                      \
    X(vips_image_new_from_buffer) X(vips_image_get_width) X(vips_image_get_height) X(vips_image_get_n_pages)  \
    X(vips_thumbnail_buffer) X(vips_colourspace) X(vips_cast_uchar) X(vips_pngsave_buffer)                    \
    X(vips_error_buffer) X(vips_error_clear) X(vips_thread_shutdown)

#define DECLARE(name) static __typeof__(name) *call_##name;
VIPS_CALLS(DECLARE)
#undef DECLARE

// Finds every call in the library; 0 when all are there.
static int load_library(void) {
    char soname[32];
    snprintf(soname, sizeof soname, "libvips.so.%d", VIPS_LIBRARY_CURRENT - VIPS_LIBRARY_AGE);
    void *library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return -1;
#define FIND(name)                                                                                             \
    call_##name = (__typeof__(name) *)dlsym(library, #name);                                                   \
    if (call_##name == NULL) return -1;
    VIPS_CALLS(FIND)
#undef FIND
    return 0;
}

// libvips' warnings (a damaged image's decoder complaints) would go to the daemon's standard error;
// the failure they lead to is reported, once, by the caller.
static void drop_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {
    (void)domain;
    (void)level;
    (void)message;
    (void)data;
}

// Set once libvips has started: a thread that never made a thumbnail must not call into it (glib's
// per-thread state would be touched uninitialized). Written before any thread can have used libvips.
static volatile int started = 0;

int vaultaire_vips_start(void) {
    // Read once by libvips (vips_get_disc_threshold): above the threshold a non-sequential load
    // decodes into a temporary file. Thumbnails load sequentially, which never does; the huge
    // threshold makes sure no other path writes decoded pixels to disk either.
    setenv("VIPS_DISC_THRESHOLD", "1000000g", 1);
    if (load_library() != 0) return -1;
    // What VIPS_INIT checks: the library's ABI is the one these headers describe.
    if (call_vips_version(3) - call_vips_version(5) != VIPS_LIBRARY_CURRENT - VIPS_LIBRARY_AGE) return -1;
    if (call_vips_init("vaultaire") != 0) return -1;
    g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO, drop_log, NULL);
    call_vips_cache_set_max(0);
    call_vips_cache_set_max_mem(0);
    call_vips_cache_set_max_files(0);
    call_vips_block_untrusted_set(TRUE);
    call_vips_concurrency_set(1);
    started = 1;
    return 0;
}

int vaultaire_vips_probe(const void *data, size_t length, char *loader, size_t loader_capacity, int *width,
                         int *height, int *pages) {
    const char *name = call_vips_foreign_find_load_buffer(data, length);
    if (name == NULL) return -1;
    snprintf(loader, loader_capacity, "%s", name);
    VipsImage *image = call_vips_image_new_from_buffer(data, length, "", "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    if (image == NULL) return -1;
    *width = call_vips_image_get_width(image);
    *height = call_vips_image_get_height(image);
    *pages = call_vips_image_get_n_pages(image);
    g_object_unref(image);
    return 0;
}

int vaultaire_vips_thumbnail_png(const void *data, size_t length, int size, void **png, size_t *png_length) {
    VipsImage *thumbnail = NULL;
    // vips_thumbnail_buffer takes a non-const pointer but only reads it.
    if (call_vips_thumbnail_buffer((void *)data, length, &thumbnail, size, "height", size, "size", VIPS_SIZE_DOWN,
                              "fail_on", VIPS_FAIL_ON_WARNING,
                              "option_string", "fail_on=warning", NULL) != 0)
        return -1;
    // sRGB 8-bit (with alpha if it had one), as the thumbnail standard's readers expect.
    VipsImage *srgb = NULL;
    int result = -1;
    if (call_vips_colourspace(thumbnail, &srgb, VIPS_INTERPRETATION_sRGB, NULL) == 0) {
        VipsImage *eight = NULL;
        if (call_vips_cast_uchar(srgb, &eight, NULL) == 0) {
            result = call_vips_pngsave_buffer(eight, png, png_length, "strip", TRUE, "compression", 6, NULL);
            g_object_unref(eight);
        }
        g_object_unref(srgb);
    }
    g_object_unref(thumbnail);
    return result;
}

void vaultaire_vips_free(void *buffer) { g_free(buffer); }

void vaultaire_vips_take_error(char *message, size_t capacity) {
    if (!started) {
        snprintf(message, capacity, "%s", "libvips could not be loaded");
        return;
    }
    const char *text = call_vips_error_buffer();
    snprintf(message, capacity, "%s", text ? text : "");
    call_vips_error_clear();
}

void vaultaire_vips_thread_done(void) {
    if (started) call_vips_thread_shutdown();
}
